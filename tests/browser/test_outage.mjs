// test_outage.mjs (issue 25, 2): while the server does not answer, the
// whole page shows it, wherever one has scrolled: the banner stays on
// screen, rows are marked stale and say "last seen", countdowns stop, an
// "as of HH:MM:SS" dates what is shown, and an open detail says "unknown"
// with force release off.  Recovery needs no reload.
import fs from 'node:fs';
import path from 'node:path';
import {
	ARTIFACTS, acquire, assert, browser, eq, run, sleep, startLockgate, token, watchedPage, within,
} from './harness.mjs';

const SECRET = 'browser-test-secret-0123456789abcdef';
const root = token(SECRET, 'root', true);
let lg, ctx, page;

const inViewport = (sel) => page.$eval(sel, (e) => {
	const r = e.getBoundingClientRect();
	return !e.hidden && r.height > 0 && r.top >= 0 && r.bottom <= innerHeight;
});

await run('outage', [
	['start lockgate with 60 locks', async () => {
		lg = await startLockgate({ LOCKGATE_JWT_SECRET: SECRET });
		for (let i = 0; i < 60; i++)
			await acquire(lg, root, 'fleet/host-' + String(i).padStart(2, '0'),
			    { ttl: 900, holder: 'agent-' + i, purpose: 'patching' });
		ctx = await browser();
		page = await watchedPage(ctx);
		await page.goto(lg.url + '/');
		await page.evaluate((t) => sessionStorage.setItem('lockgate.token', t), root);
		await page.goto(lg.url + '/?sort=name&rows=100');
		await within(4000, async () => (await page.$$eval('#rows tr', (r) => r.length)) === 60, '60 rows');
		eq(await page.getAttribute('body', 'data-stale'), 'false', 'fresh at first');
	}],

	['scrolled to the bottom, the server is killed', async () => {
		await page.evaluate(() => window.scrollTo(0, document.body.scrollHeight));
		assert(await page.evaluate(() => scrollY > 400), 'the page did not scroll');
		await lg.stop();
		const t = await within(8000, async () => await inViewport('#banner') &&
		    /not answering/.test(await page.textContent('#banner')), 'banner on screen while scrolled');
		console.log(`    banner on screen after ${t} ms`);
		const b = await page.textContent('#banner');
		assert(/since \d\d:\d\d:\d\d/.test(b) && /as of \d\d:\d\d:\d\d/.test(b), 'banner dates it: ' + b);
		// the table's header is on screen too (sticky), under the banner
		assert(await inViewport('thead th[data-key="name"]'), 'sticky table header');
		const top = await page.$eval('thead th', (e) => e.getBoundingClientRect().top);
		const bannerBottom = await page.$eval('#banner', (e) => e.getBoundingClientRect().bottom);
		assert(top >= bannerBottom - 1, 'the table header hides under the banner: ' + top + ' < ' + bannerBottom);
	}],

	['rows are stale: "last seen", stopped countdowns, "as of"', async () => {
		eq(await page.getAttribute('body', 'data-stale'), 'true', 'body marked stale');
		const badges = await page.$$eval('#rows .badge', (b) => b.map((x) => x.textContent));
		assert(badges.length === 60 && badges.every((t) => /^last seen /.test(t)),
		    'badges still state a live state: ' + badges.slice(0, 3).join(', '));
		const a = await page.$$eval('#rows td.expires', (t) => t.map((x) => x.textContent));
		assert(a.every((t) => /^at \d\d:\d\d:\d\d$/.test(t)), 'countdown cells: ' + a[0]);
		await sleep(2100);
		const b = await page.$$eval('#rows td.expires', (t) => t.map((x) => x.textContent));
		eq(b.join(), a.join(), 'countdowns kept ticking during the outage');
		assert(/as of \d\d:\d\d:\d\d/.test(await page.textContent('#summary')), 'summary says as of');
		assert(/not answering · as of/.test(await page.textContent('#live')), 'live marker');
		// a stale row's text is muted, not hidden
		const bg = await page.$eval('#rows td', (e) => getComputedStyle(e).backgroundImage);
		assert(/gradient/.test(bg), 'stale rows are not marked: ' + bg);
		fs.mkdirSync(ARTIFACTS, { recursive: true });
		await page.screenshot({ path: path.join(ARTIFACTS, 'outage-desktop.png') });
		await page.setViewportSize({ width: 390, height: 844 });
		await page.screenshot({ path: path.join(ARTIFACTS, 'outage-phone.png') });
		await page.setViewportSize({ width: 1280, height: 800 });
	}],

	['an open detail says unknown, with force release off', async () => {
		await page.click('#rows tr[data-name="fleet/host-59"] td.name button');
		await page.waitForSelector('#detaildlg[open]', { timeout: 2000 });
		eq(await page.getAttribute('#detaildlg', 'data-status'), 'unknown', 'detail status');
		const note = await page.textContent('#detailnote');
		assert(/Unknown now: lockgate is not answering since \d\d:\d\d:\d\d/.test(note), 'note: ' + note);
		eq(await page.isDisabled('#force'), true, 'force release during an outage');
		await page.screenshot({ path: path.join(ARTIFACTS, 'outage-detail.png') });
		assert(/unknown \(last seen held\)/.test(await page.textContent('#detailfields')), 'State field');
		page.check();
	}],
]);
