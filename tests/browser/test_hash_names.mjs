// test_hash_names.mjs: #/locks/NAME opens a lock only when NAME is a lock
// name the server would accept (api_name_valid in api/validate.c).  Any
// other hash opens nothing and sends no request: fetch collapses '..', so
// #/locks/prod/../staging/db would read (and let an admin force-release)
// staging/db under another title, and #/locks/../../metrics would send the
// bearer token to /metrics.  The page may only ask for its own files, the
// list and whoami; a valid name still opens its lock.
import {
	acquire, assert, browser, eq, run, sleep, startLockgate, token, watchedPage, within,
} from './harness.mjs';

const SECRET = 'browser-test-secret-0123456789abcdef';
const alice = token(SECRET, 'alice');
const root = token(SECRET, 'root', true);
const PAGE_ROUTES = ['/', '/app.js', '/app.css', '/favicon.svg', '/v1/whoami', '/v1/locks'];
const BAD = ['#/locks/prod/../staging/db', '#/locks/../../metrics', '#/locks/a%2Fb', '#/locks/a"b',
    '#/locks/./a', '#/locks/a/.', '#/locks/a//b', '#/locks/a/', '#/locks//a', '#/locks/-a',
    '#/locks/a%20b', '#/locks/%C3%A9', '#/locks/%', '#/locks/' + 'x'.repeat(257)];
// the edges of the grammar that are names
const GOOD = ['x', 'a/.b/c..', 'A-1_b.c/d', 'x'.repeat(256)];
let lg, ctx, page;
const paths = [];

const rowCount = (p) => p.$$eval('#rows tr[data-name]', (trs) => trs.length);

// What went out since mark M that is not one of the page's own routes.
const strays = (m) => paths.slice(m).filter((p) => !PAGE_ROUTES.includes(p));

const short = (s) => s.length > 40 ? s.slice(0, 20) + '…(' + s.length + ' chars)' : s;

// A fresh load of the dashboard at HASH, the list shown and a moment for
// the detail it would open to ask for its lock.
async function load(hash) {
	await page.goto('about:blank');
	await page.goto(lg.url + '/' + hash);
	await within(4000, async () => (await rowCount(page)) === 2, 'the list');
	await sleep(300);
}

await run('hash names', [
	['start, seed and sign in as an admin', async () => {
		lg = await startLockgate({ LOCKGATE_JWT_SECRET: SECRET });
		await acquire(lg, alice, 'prod/db', { ttl: 600, holder: 'job-1' });
		await acquire(lg, alice, 'staging/db', { ttl: 600, holder: 'job-2' });
		ctx = await browser();
		page = await watchedPage(ctx);
		page.on('request', (r) => {
			const u = new URL(r.url());
			if (u.origin === lg.url)
				paths.push(decodeURIComponent(u.pathname));
		});
		await page.goto(lg.url + '/');
		await page.evaluate((t) => sessionStorage.setItem('lockgate.token', t), root);
	}],

	['a hash that is no lock name opens nothing and asks for nothing, on load', async () => {
		const bad = [];
		for (const h of BAD) {
			const m = paths.length;
			await load(h);
			assert(paths.slice(m).includes('/v1/locks'), h + ': the list was not read');
			if (strays(m).length)
				bad.push(short(h) + ' asked for ' + strays(m).map(short).join(' '));
			if (await page.isVisible('#detaildlg'))
				bad.push(short(h) + ' opened a detail titled ' + short(await page.textContent('#detailtitle')));
		}
		eq(bad.join('\n'), '', 'hashes that are no lock name');
	}],

	['nor when the hash changes under an open page', async () => {
		await load('');
		const bad = [];
		for (const h of BAD) {
			const m = paths.length;
			await page.evaluate((x) => { location.hash = x; }, h);
			await sleep(300);
			if (strays(m).length)
				bad.push(short(h) + ' asked for ' + strays(m).map(short).join(' '));
			if (await page.isVisible('#detaildlg')) {
				bad.push(short(h) + ' opened a detail titled ' + short(await page.textContent('#detailtitle')));
				await page.click('#detailclose');
			}
		}
		eq(bad.join('\n'), '', 'hashes that are no lock name');
	}],

	['a valid name still opens its lock, on load and on a hash change', async () => {
		const m = paths.length;
		await load('#/locks/staging/db');
		await page.waitForSelector('#detaildlg[open]', { timeout: 5000 });
		eq(await page.textContent('#detailtitle'), 'staging/db', 'the title');
		await within(3000, async () => (await page.getAttribute('#detaildlg', 'data-status')) === 'held',
		    'held');
		assert(paths.slice(m).includes('/v1/locks/staging/db'), 'the lock was not read');
		for (const name of GOOD) {
			await page.evaluate((x) => { location.hash = x; }, '#/locks/' + name);
			await within(3000, async () => (await page.textContent('#detailtitle')) === name,
			    name + ': not opened');
			await within(3000, async () => paths.includes('/v1/locks/' + name), name + ': not read');
		}
		page.check();
		await lg.stop();
	}],
]);
