// test_dashboard.mjs: the dashboard in a real headless chromium against a
// real lockgate (mem store) with seeded locks.  Run: sh tests/browser/run.sh
import fs from 'node:fs';
import path from 'node:path';
import {
	ARTIFACTS, acquire, assert, browser, call, eq, release, run, sleep,
	startLockgate, token, watchedPage, within,
} from './harness.mjs';

const SECRET = 'browser-test-secret-0123456789abcdef';
const XSS_HOLDER = '<img src=x onerror="window.__xss=1">';
const XSS_PURPOSE = '<script>window.__xss=2</script>';
const LIVE_MS = 2000;     // the issue: changes show within 2 s

const alice = token(SECRET, 'alice');
const root = token(SECRET, 'root', true);
const leaseIds = [];
let lg, ctx, page, tokens = {};

const row = (name) => `#rows tr[data-name="${name}"]`;
const cell = (name, cls) => page.textContent(`${row(name)} td.${cls}`);
const rowNames = () => page.$$eval('#rows tr', (trs) => trs.map((t) => t.dataset.name));

async function seed(tok, name, params) {
	const l = await acquire(lg, tok, name, params);
	leaseIds.push(l.lease_id);
	tokens[name] = l;
	return l;
}

async function signIn(tok) {
	await page.waitForSelector('#tokendlg[open]', { timeout: 5000 });
	await page.fill('#tokeninput', tok);
	await page.click('#tokenok');
	await page.waitForSelector('#tokendlg', { state: 'hidden', timeout: 2000 });
}

async function openDetail(name) {
	await page.click(`${row(name)} td.name button`);
	await page.waitForSelector('#detaildlg[open]', { timeout: 2000 });
	await within(3000, async () => (await page.textContent('#detailtitle')) === name,
	    'detail of ' + name);
}

async function noLeaseIdShown() {
	const html = await page.content();
	for (const id of leaseIds)
		assert(!html.includes(id), 'a lease_id is in the page');
	assert(!/lease_id/.test(html), 'the word lease_id is in the page');
}

await run('dashboard', [
	['start lockgate and seed locks', async () => {
		lg = await startLockgate({ LOCKGATE_JWT_SECRET: SECRET,
		    LOCKGATE_LINK_HOSTS: 'ci.example,GitHub.com' });
		await seed(alice, 'prod/deploy', {
			ttl: 600, holder: 'https://ci.example/job/42',
			purpose: 'deploy v1.2.3', labels: { env: 'prod', team: 'web' },
		});
		await seed(alice, 'ci/nightly', { ttl: 300, holder: 'runner-7', purpose: 'nightly build' });
		await seed(root, 'db/migrate', {
			ttl: 300, holder: 'bob@laptop', purpose: 'schema 42', expected_duration: 1,
		});
		await seed(alice, 'xss/probe', { ttl: 300, holder: XSS_HOLDER, purpose: XSS_PURPOSE });
		await seed(alice, 'tmp/short', { ttl: 2, holder: 'flaky-job', purpose: 'gone soon' });
	}],

	['assets carry the security headers', async () => {
		const r = await call(lg, 'GET', '/');
		eq(r.status, 200, 'GET /');
		const csp = r.headers.get('content-security-policy') || '';
		assert(csp.includes("script-src 'self'"), 'CSP script-src: ' + csp);
		assert(csp.includes("frame-ancestors 'none'"), 'CSP frame-ancestors: ' + csp);
		assert(!/unsafe-(inline|eval)/.test(csp), 'CSP allows unsafe-*: ' + csp);
		eq(r.headers.get('x-content-type-options'), 'nosniff', 'nosniff');
		eq(r.headers.get('referrer-policy'), 'no-referrer', 'Referrer-Policy');
		assert(/text\/html/.test(r.headers.get('content-type')), 'index content type');
		const js = await call(lg, 'GET', '/app.js');
		eq(js.status, 200, 'GET /app.js');
		assert(/javascript/.test(js.headers.get('content-type')), 'app.js content type');
		assert(!/innerHTML|outerHTML|insertAdjacentHTML|document\.write|eval\(/.test(js.text),
		    'app.js uses an HTML sink');
	}],

	['the page asks for a token and keeps it in sessionStorage only', async () => {
		ctx = await browser();
		page = await watchedPage(ctx);
		await page.goto(lg.url + '/');
		await page.waitForSelector('#tokendlg[open]', { timeout: 5000 });
		await signIn(alice);
		await page.waitForSelector(row('prod/deploy'), { timeout: 3000 });
		eq(await page.evaluate(() => sessionStorage.getItem('lockgate.token')), alice,
		    'token in sessionStorage');
		eq(await page.evaluate(() => localStorage.length), 0, 'localStorage');
		eq(await page.evaluate(() => document.cookie), '', 'cookies');
		assert(!page.url().includes(alice.slice(-20)), 'token in the URL');
		eq(await page.textContent('#who'), 'alice', 'who');
		// a reload in the same tab does not ask again
		await page.reload();
		await page.waitForSelector(row('prod/deploy'), { timeout: 3000 });
		eq(await page.isVisible('#tokendlg'), false, 'token asked again after reload');
	}],

	['rows show every field', async () => {
		eq(await cell('prod/deploy', 'owner'), 'alice', 'owner');
		eq(await cell('prod/deploy', 'purpose'), 'deploy v1.2.3', 'purpose');
		eq(await page.getAttribute(`${row('prod/deploy')} td.holder a`, 'href'),
		    'https://ci.example/job/42', 'holder link');
		eq(await cell('ci/nightly', 'holder'), 'runner-7', 'plain holder');
		eq(await page.$(`${row('ci/nightly')} td.holder a`), null, 'non-URL holder is a link');
		eq(await page.getAttribute(`${row('prod/deploy')} td.holder a`, 'rel'),
		    'noopener noreferrer', 'holder link rel');
		eq(await page.$$eval(`${row('prod/deploy')} td.labels .chip`, (c) => c.map((x) => x.textContent)).then((a) => a.join(' ')),
		    'env=prod team=web', 'labels');
		eq(await cell('prod/deploy', 'token'), tokens['prod/deploy'].fencing_token, 'fencing token');
		eq(await cell('prod/deploy', 'state'), 'held', 'state');
		assert(/ago|just now/.test(await cell('prod/deploy', 'acquired')), 'acquired is relative');
		assert(/^(9m|10m)/.test(await cell('prod/deploy', 'expires')), 'expires in: ' + await cell('prod/deploy', 'expires'));
		// issue 25, 3: how late, and what was expected
		await within(4000, async () => /^overdue by \d+s \(expected 1s\)$/.test(await cell('db/migrate', 'state')),
		    'db/migrate (expected 1 s) shows "overdue by Ns (expected 1s)"');
		await within(5000, async () => /expired/.test(await cell('tmp/short', 'state')),
		    'tmp/short (ttl 2 s) shows expired, awaiting takeover');
		eq(await cell('tmp/short', 'state'), 'expired, awaiting takeover', 'expired state');
		await noLeaseIdShown();
	}],

	['the countdown ticks; an unchanged list costs a 304', async () => {
		let ok200 = 0, not304 = 0;
		const seen = (r) => {
			if (!r.url().includes('/v1/locks?'))
				return;
			if (r.status() === 304)
				not304++;
			else if (r.status() === 200)
				ok200++;
		};
		page.on('response', seen);
		const a = await cell('prod/deploy', 'expires');
		await sleep(2100);
		page.off('response', seen);
		assert(not304 >= 1, 'no 304 while nothing changed (' + ok200 + ' full answers)');
		const b = await cell('prod/deploy', 'expires');
		assert(a !== b, 'countdown did not move: ' + a);
		const secs = (t) => t.split(' ').reduce((s, p) => s + parseInt(p, 10) * (p.endsWith('m') ? 60 : 1), 0);
		assert(secs(b) < secs(a), 'countdown went up: ' + a + ' -> ' + b);
	}],

	['holder and purpose with HTML are text and run nothing', async () => {
		eq(await cell('xss/probe', 'holder'), XSS_HOLDER, 'holder as text');
		eq(await cell('xss/probe', 'purpose'), XSS_PURPOSE, 'purpose as text');
		eq(await page.$$eval('#rows img, #rows script', (e) => e.length), 0, 'elements from data');
		await openDetail('xss/probe');
		const dd = await page.$$eval('#detailfields dd', (d) => d.map((x) => x.textContent));
		assert(dd.includes(XSS_HOLDER) && dd.includes(XSS_PURPOSE), 'detail shows them as text');
		eq(await page.$$eval('#detaildlg img, #detaildlg script, #timeline img', (e) => e.length), 0,
		    'elements from data in the detail');
		await page.click('#detailclose');
		eq(await page.evaluate(() => window.__xss), undefined, 'injected code ran');
		page.check();
	}],

	['a new lock appears and a released one disappears within 2 s', async () => {
		const l = await seed(alice, 'ci/new-one', { ttl: 120, holder: 'job-99', purpose: 'fresh' });
		const t1 = await within(LIVE_MS, () => page.$(row('ci/new-one')), 'new lock row');
		await release(lg, alice, 'ci/new-one', l.lease_id);
		const t2 = await within(LIVE_MS, async () => !(await page.$(row('ci/new-one'))), 'released lock row gone');
		console.log(`    appeared after ${t1} ms, disappeared after ${t2} ms`);
	}],

	['search (client side) and prefix (server side) filter; sort by column', async () => {
		await page.fill('#search', 'nightly');
		await within(1000, async () => (await rowNames()).join() === 'ci/nightly', 'search nightly');
		await page.fill('#search', 'env=prod');
		await within(1000, async () => (await rowNames()).join() === 'prod/deploy', 'search label');
		await page.fill('#search', 'no-such-thing');
		await within(1000, async () => /No lock matches/.test(await page.textContent('#empty')), 'no match message');
		await page.fill('#search', '');
		await page.fill('#prefix', 'ci/');
		await within(LIVE_MS, async () => (await rowNames()).join() === 'ci/nightly', 'prefix ci/');
		await page.fill('#prefix', 'nothing/');
		await within(LIVE_MS, async () => /No lock is held under/.test(await page.textContent('#empty')),
		    'empty prefix message');
		await page.fill('#prefix', '');
		await within(LIVE_MS, async () => (await rowNames()).length === 5, 'all rows back');
		// sort by fencing token, both ways (mem store tokens increase)
		await page.click('th[data-key="token"] button');
		const up = await page.$$eval('#rows td.token', (t) => t.map((x) => BigInt(x.textContent)));
		for (let i = 1; i < up.length; i++)
			assert(up[i - 1] <= up[i], 'ascending tokens');
		eq(await page.getAttribute('th[data-key="token"]', 'aria-sort'), 'ascending', 'aria-sort');
		await page.click('th[data-key="token"] button');
		const down = await page.$$eval('#rows td.token', (t) => t.map((x) => BigInt(x.textContent)));
		for (let i = 1; i < down.length; i++)
			assert(down[i - 1] >= down[i], 'descending tokens');
		await page.click('th[data-key="name"] button');
	}],

	['keyboard: tab to a lock and open its detail with Enter', async () => {
		await page.focus('#search');
		let found = false;
		for (let i = 0; i < 40 && !found; i++) {
			await page.keyboard.press('Tab');
			found = await page.evaluate(() => document.activeElement &&
			    document.activeElement.dataset.lock === 'ci/nightly');
		}
		assert(found, 'could not reach the ci/nightly button with Tab');
		await page.keyboard.press('Enter');
		await page.waitForSelector('#detaildlg[open]', { timeout: 2000 });
		await page.keyboard.press('Escape');
		await page.waitForSelector('#detaildlg', { state: 'hidden', timeout: 2000 });
	}],

	['non-admins cannot force release', async () => {
		await openDetail('ci/nightly');
		eq(await page.isDisabled('#force'), true, 'force button enabled for alice');
		assert(/Only an admin/.test(await page.textContent('#forcehint')), 'hint for non-admin');
		await page.click('#detailclose');
		const r = await call(lg, 'POST', '/v1/locks/ci/nightly:forceRelease', alice);
		eq(r.status, 403, 'server refuses alice');
	}],

	['detail shows the timeline', async () => {
		await openDetail('prod/deploy');
		await within(3000, async () => /acquired/.test(await page.textContent('#timeline')),
		    'timeline shows acquired');
		assert(/owner alice/.test(await page.textContent('#timeline')), 'timeline names the owner');
		fs.mkdirSync(ARTIFACTS, { recursive: true });
		await page.screenshot({ path: path.join(ARTIFACTS, 'dashboard-detail.png') });
		await page.click('#detailclose');
	}],

	['an admin force-releases after a confirmation naming the holder', async () => {
		await page.click('#signout');
		await signIn(root);
		await within(3000, async () => (await page.textContent('#who')) === 'root (admin)', 'admin who');
		await openDetail('prod/deploy');
		eq(await page.isDisabled('#force'), false, 'force button for admin');
		await page.click('#force');
		await page.waitForSelector('#confirmdlg[open]', { timeout: 2000 });
		const text = await page.textContent('#confirmtext');
		assert(text.includes('https://ci.example/job/42'), 'confirmation names the holder: ' + text);
		assert(text.includes('prod/deploy'), 'confirmation names the lock');
		// cancelling does nothing
		await page.click('#confirmcancel');
		await sleep(300);
		eq((await call(lg, 'GET', '/v1/locks/prod/deploy', root)).status, 200, 'still held after cancel');
		await page.click('#force');
		await page.waitForSelector('#confirmdlg[open]', { timeout: 2000 });
		await page.fill('#reason', 'browser test');
		await page.click('#confirmok');
		await within(3000, async () => /Force-released/.test(await page.textContent('#detailmsg')), 'success message');
		eq((await call(lg, 'GET', '/v1/locks/prod/deploy', root)).status, 404, 'released on the server');
		await within(LIVE_MS + 500, async () => !(await page.$(row('prod/deploy'))), 'row gone');
		await within(3000, async () => /force-released/.test(await page.textContent('#timeline')),
		    'timeline shows force-released');
		await page.click('#detailclose');
	}],

	['a 403 from the server is shown', async () => {
		// the admin right goes away between opening and confirming
		await openDetail('ci/nightly');
		await page.click('#force');
		await page.waitForSelector('#confirmdlg[open]', { timeout: 2000 });
		await page.evaluate((t) => sessionStorage.setItem('lockgate.token', t), alice);
		await page.fill('#reason', 'browser test');
		await page.click('#confirmok');
		await within(3000, async () => /Refused \(403\)/.test(await page.textContent('#detailmsg')),
		    '403 message');
		eq((await call(lg, 'GET', '/v1/locks/ci/nightly', root)).status, 200, 'still held');
		await page.evaluate((t) => sessionStorage.setItem('lockgate.token', t), root);
		await page.click('#detailclose');
	}],

	['a right-to-left override in a value reorders only that value', async () => {
		// U+202E (RIGHT-TO-LEFT OVERRIDE) at the end of a caller's text
		// would reverse what the page writes after it (fencing token 37
		// shown as 73) unless the text is isolated: each such text must sit
		// alone in a <bdi> (unicode-bidi: isolate) or be all there is in
		// its table cell or detail field (a paragraph of its own).
		const RLO = '\u202e';
		const erin = token(SECRET, 'erin' + RLO);
		await seed(erin, 'bidi/probe', {
			ttl: 300, holder: 'ci-runner-7' + RLO, purpose: 'p' + RLO,
			labels: { k: 'v' + RLO, env: 'prod' },
		});
		await within(LIVE_MS, () => page.$(row('bidi/probe')), 'bidi/probe row');
		await openDetail('bidi/probe');
		await within(3000, async () => /acquired/.test(await page.textContent('#timeline')),
		    'timeline of bidi/probe');
		await page.click('#force');
		await page.waitForSelector('#confirmdlg[open]', { timeout: 2000 });
		const bad = await page.evaluate((rlo) => {
			const out = [];
			let seen = 0;
			for (const root of ['#rows', '#detaildlg', '#confirmdlg', '#who']) {
				const w = document.createTreeWalker(document.querySelector(root),
				    NodeFilter.SHOW_TEXT);
				for (let n = w.nextNode(); n; n = w.nextNode()) {
					if (!n.data.includes(rlo))
						continue;
					seen++;
					const p = n.parentElement;
					const b = p.closest('bdi');
					const alone = (e) => e && e.textContent === n.data;
					const cell = p.closest('td, dd');
					const ok = (b && alone(b) &&
					    getComputedStyle(b).unicodeBidi === 'isolate') ||
					    (cell && alone(cell));
					if (!ok)
						out.push(root + ': ' + JSON.stringify((b || p).textContent) +
						    ' in ' + JSON.stringify(p.parentElement.textContent));
				}
			}
			return { out, seen };
		}, RLO);
		// row: owner, holder, purpose, label value; detail: the same,
		// the timeline's owner and holder; the confirmation: holder, owner
		assert(bad.seen >= 10, 'texts with U+202E found: ' + bad.seen);
		eq(bad.out.join('\n'), '', 'texts not isolated');
		await page.click('#confirmcancel');
		await page.click('#detailclose');
	}],

	['closing a detail and at once opening another keeps the new one live', async () => {
		// The dialog's close event comes a frame after close(); it used to
		// clear the detail that had been opened in between.
		await openDetail('ci/nightly');
		await page.evaluate(() => {
			document.getElementById('detailclose').click();
			document.querySelector('#rows tr[data-name="bidi/probe"] td.name button').click();
		});
		await within(3000, async () => (await page.textContent('#detailtitle')) === 'bidi/probe',
		    'second detail open');
		await within(3000, async () => /acquired/.test(await page.textContent('#timeline')),
		    'the second detail loads its timeline');
		await page.click('#force');
		await page.waitForSelector('#confirmdlg[open]', { timeout: 2000 });
		assert((await page.textContent('#confirmtext')).includes('bidi/probe'),
		    'confirmation for the second lock');
		await page.click('#confirmcancel');
		await page.click('#detailclose');
	}],

	['a URL holder on a host the server does not name is text, not a link', async () => {
		const bad = 'https://login.evil.example/github.com';
		const l = await acquire(lg, root, 'phish/probe', { ttl: 300, holder: bad });
		await within(LIVE_MS, () => page.$(row('phish/probe')), 'phish/probe row');
		eq(await page.$(`${row('phish/probe')} td.holder a`), null, 'a link to another host');
		eq(await cell('phish/probe', 'holder'), bad, 'the URL as text');
		await release(lg, root, 'phish/probe', l.lease_id);
		await within(LIVE_MS, async () => (await page.$(row('phish/probe'))) === null,
		    'phish/probe row gone');
	}],

	['the longest legal label keeps every column on the screen', async () => {
		await seed(root, 'wide/label', {
			ttl: 300, holder: 'h', purpose: 'p',
			labels: { ['k'.repeat(63)]: 'v'.repeat(128) },
		});
		await within(LIVE_MS, () => page.$(row('wide/label')), 'wide/label row');
		const m = await page.evaluate(() => ({
			vw: document.documentElement.clientWidth,
			right: Math.max(...[...document.querySelectorAll('#rows td.state')]
			    .map((td) => td.getBoundingClientRect().right)),
			table: document.querySelector('#rows').closest('table').scrollWidth,
		}));
		assert(m.right <= m.vw && m.table <= m.vw,
		    'columns past the screen: state column ends at ' + m.right +
		    ' px, table ' + m.table + ' px, viewport ' + m.vw + ' px');
	}],

	['screenshots', async () => {
		await seed(root, 'deploy/web', {
			ttl: 900, holder: 'https://ci.example/acme/web/-/jobs/8812',
			purpose: 'canary rollout 3.4.0', labels: { env: 'staging', team: 'web' },
		});
		await seed(root, 'ops/backup', { ttl: 6, holder: 'cron@db-1', purpose: 'nightly backup', labels: { tier: 'gold' } });
		await within(LIVE_MS, () => page.$(row('ops/backup')), 'ops/backup row');
		await within(3000, async () => (await cell('ops/backup', 'state')) === 'expiring soon',
		    'ops/backup (ttl 6 s) shows expiring soon');
		await page.mouse.move(1, 790);
		await noLeaseIdShown();
		fs.mkdirSync(ARTIFACTS, { recursive: true });
		await page.screenshot({ path: path.join(ARTIFACTS, 'dashboard.png'), fullPage: true });
		const phone = await ctx.newPage();
		await phone.setViewportSize({ width: 390, height: 844 });
		await phone.emulateMedia({ colorScheme: 'dark' });
		await phone.goto(lg.url + '/');
		await phone.waitForSelector('#tokendlg[open]', { timeout: 5000 });
		await phone.fill('#tokeninput', root);
		await phone.click('#tokenok');
		await phone.waitForSelector(row('ci/nightly'), { timeout: 3000 });
		await phone.screenshot({ path: path.join(ARTIFACTS, 'dashboard-phone-dark.png'), fullPage: true });
		const width = await phone.evaluate(() => document.documentElement.scrollWidth);
		assert(width <= 390, 'the phone layout scrolls sideways: ' + width + ' px');
		await phone.close();
		page.check();
	}],

	['a 401 is explained and asks for a token', async () => {
		await page.evaluate(() => sessionStorage.setItem('lockgate.token', 'not-a-jwt'));
		await page.reload();
		await page.waitForSelector('#tokendlg[open]', { timeout: 5000 });
		assert(/refused/i.test(await page.textContent('#tokenwhy')), 'why: ' + await page.textContent('#tokenwhy'));
		await page.click('#tokencancel');
		await within(3000, async () => /Not signed in|refused/i.test(await page.textContent('#banner')), '401 banner');
		eq(await page.$$eval('#rows tr', (r) => r.length), 0, 'rows without a valid token');
		eq(await page.textContent('#empty'), 'Sign in to see the locks.', 'empty table says why');
	}],

	['a server that stops answering is reported', async () => {
		await page.evaluate((t) => sessionStorage.setItem('lockgate.token', t), alice);
		await page.reload();
		await page.waitForSelector(row('ci/nightly'), { timeout: 3000 });
		await lg.stop();
		for (const t of [alice, root])
			assert(!lg.log().includes(t.split('.')[2]), 'a token reached the log');
		await within(8000, async () => /not answering/.test(await page.textContent('#banner')), 'down banner');
		// issue 25, 2: the marker dates what the page shows
		assert(/^not answering · as of \d\d:\d\d:\d\d$/.test(await page.textContent('#live')),
		    'live indicator: ' + await page.textContent('#live'));
		assert(await page.$(row('ci/nightly')), 'last data kept on screen');
		page.check();
		await page.close();
	}],

	['with public read the page reads without a token', async () => {
		lg = await startLockgate({ LOCKGATE_JWT_SECRET: SECRET, LOCKGATE_PUBLIC_READ: 'true' });
		eq((await call(lg, 'GET', '/v1/locks')).status, 200, 'anonymous list');
		await seed(alice, 'pub/lock', { ttl: 120, holder: 'h', purpose: 'public' });
		page = await watchedPage(ctx);
		await page.goto(lg.url + '/');
		await page.waitForSelector(row('pub/lock'), { timeout: 4000 });
		eq(await page.isVisible('#tokendlg'), false, 'token asked with public read');
		eq(await page.textContent('#who'), 'public read', 'who');
		await openDetail('pub/lock');
		eq(await page.isDisabled('#force'), true, 'force for anonymous');
		await page.click('#detailclose');
		await release(lg, alice, 'pub/lock', tokens['pub/lock'].lease_id);
		await within(LIVE_MS, async () => /No locks are held/.test(await page.textContent('#empty')),
		    'no-locks message');
		page.check();
		await lg.stop();
		assert(!lg.log().includes(alice.split('.')[2]), 'a token reached the log');
	}],
]);
