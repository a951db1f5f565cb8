// test_links.mjs (issue 25, 6): what is shown can be linked and kept: the
// filters, sort and grouping are in the query, the open lock in
// #/locks/NAME; a deep link opened in a fresh page shows the same view; a
// reload keeps it.  Force release asks for a reason, which reaches the audit
// log line, the event and the timeline, and the timeline says it holds only
// what this instance saw and where the full trail is.
import {
	acquire, assert, browser, call, eq, run, sleep, startLockgate, token, watchedPage, within,
} from './harness.mjs';

const SECRET = 'browser-test-secret-0123456789abcdef';
const alice = token(SECRET, 'alice');
const root = token(SECRET, 'root', true);
const REASON = 'deploy job 8812 hung; INC-2041 «ünïcode»';
let lg, ctx, page, link;

const rowNames = (p) => p.$$eval('#rows tr[data-name]', (trs) => trs.map((t) => t.dataset.name));

await run('links', [
	['start and seed', async () => {
		lg = await startLockgate({ LOCKGATE_JWT_SECRET: SECRET });
		await acquire(lg, alice, 'prod/deploy', { ttl: 600, holder: 'job-1', purpose: 'deploy web' });
		await acquire(lg, alice, 'prod/db/migrate', { ttl: 600, holder: 'job-2', purpose: 'migrate' });
		await acquire(lg, alice, 'staging/deploy', { ttl: 600, holder: 'job-3', purpose: 'deploy web' });
		ctx = await browser();
		page = await watchedPage(ctx);
		await page.goto(lg.url + '/');
		await page.evaluate((t) => sessionStorage.setItem('lockgate.token', t), root);
		await page.reload();
		await within(4000, async () => (await rowNames(page)).length === 3, 'three rows');
	}],

	['filters, sort, grouping and the open lock go into the URL', async () => {
		await page.fill('#search', 'deploy web');
		await page.selectOption('#sort', 'name');
		await page.click('th[data-key="name"] button'); // descending
		await page.selectOption('#group', '1');
		await page.click('#rows tr[data-name="prod/deploy"] td.name button');
		await page.waitForSelector('#detaildlg[open]');
		const u = new URL(page.url());
		eq(u.searchParams.get('q'), 'deploy web', 'q');
		eq(u.searchParams.get('sort'), '-name', 'sort');
		eq(u.searchParams.get('group'), '1', 'group');
		eq(u.hash, '#/locks/prod/deploy', 'hash');
		link = await page.getAttribute('#detaillink', 'href');
		eq(link, page.url(), 'the link in the detail is the page URL');
	}],

	['the link in a fresh page (new browser profile) shows the same view', async () => {
		const ctx2 = await browser();
		const p2 = await watchedPage(ctx2);
		await p2.goto(link);
		// a fresh tab has no token: sign in first, then the lock opens
		await p2.waitForSelector('#tokendlg[open]', { timeout: 5000 });
		await p2.fill('#tokeninput', alice);
		await p2.click('#tokenok');
		await p2.waitForSelector('#detaildlg[open]', { timeout: 5000 });
		eq(await p2.textContent('#detailtitle'), 'prod/deploy', 'the linked lock is open');
		await within(3000, async () => (await p2.getAttribute('#detaildlg', 'data-status')) === 'held', 'held');
		eq(await p2.inputValue('#search'), 'deploy web', 'search kept');
		eq(await p2.inputValue('#sort'), 'name', 'sort kept');
		eq(await p2.getAttribute('th[data-key="name"]', 'aria-sort'), 'descending', 'direction kept');
		eq(await p2.inputValue('#group'), '1', 'grouping kept');
		await p2.click('#detailclose');
		eq(new URL(p2.url()).hash, '', 'closing the detail takes it out of the URL');
		eq((await rowNames(p2)).join(), 'staging/deploy,prod/deploy', 'the filtered, sorted rows');
		eq(await p2.$$eval('#rows tr.group', (g) => g.map((x) => x.dataset.group).join()), 'staging/,prod/',
		    'group headers');
		p2.check();
		await ctx2.close();
	}],

	['a reload keeps the view', async () => {
		await page.reload();
		await page.waitForSelector('#detaildlg[open]', { timeout: 5000 });
		eq(await page.textContent('#detailtitle'), 'prod/deploy', 'detail after reload');
		eq(await page.inputValue('#search'), 'deploy web', 'search after reload');
	}],

	['the timeline says what it holds and where the full trail is', async () => {
		const note = await page.textContent('#timelinenote');
		assert(/Only the events this lockgate instance saw/.test(note), 'honesty note: ' + note);
		assert(/docs\/deploy\.md/.test(note), 'names where the audit trail is');
		eq(await page.textContent('#auditquery'),
		    'jsonPayload.message="lock event" AND jsonPayload.lock="prod/deploy"', 'the query for this lock');
	}],

	['force release needs a reason, which reaches the log line, the event and the timeline', async () => {
		await within(3000, async () => !(await page.isDisabled('#force')), 'force enabled');
		await page.click('#force');
		await page.waitForSelector('#confirmdlg[open]');
		// no reason: the dialog stays, nothing is released
		await page.click('#confirmok');
		await sleep(300);
		eq(await page.isVisible('#confirmdlg'), true, 'released without a reason');
		eq((await call(lg, 'GET', '/v1/locks/prod/deploy', root)).status, 200, 'still held');
		await page.fill('#reason', REASON);
		await page.click('#confirmok');
		await within(3000, async () => /Force-released/.test(await page.textContent('#detailmsg')), 'released');
		const ev = await call(lg, 'GET', '/v1/locks/prod/deploy:events', root);
		const forced = ev.body.events.find((e) => e.kind === 'force_released');
		eq(forced && forced.reason, REASON, 'the event carries the reason');
		eq(forced.actor, 'root', 'and who');
		await within(3000, async () => (await page.textContent('#timeline')).includes('reason: ' + REASON),
		    'the timeline shows the reason');
		await lg.stop();
		const line = lg.log().split('\n').find((l) => /"event":"forced"/.test(l));
		assert(line, 'no log line for the force release');
		eq(JSON.parse(line).reason, REASON, 'the log line carries the reason');
		eq(JSON.parse(line).lock, 'prod/deploy', 'the log line names the lock');
	}],

	['the server refuses an over-long reason', async () => {
		lg = await startLockgate({ LOCKGATE_JWT_SECRET: SECRET });
		await acquire(lg, alice, 'x', { ttl: 60 });
		const r = await call(lg, 'POST', '/v1/locks/x:forceRelease?reason=' + 'r'.repeat(257), root);
		eq(r.status, 400, 'a 257-byte reason');
		eq((await call(lg, 'GET', '/v1/locks/x', root)).status, 200, 'still held');
		page.check();
		await lg.stop();
	}],
]);
