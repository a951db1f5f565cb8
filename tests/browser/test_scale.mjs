// test_scale.mjs: the dashboard stays fast with 10,000 locks.  The assets
// are the real files of web/ and the API answers are synthetic (routed in
// the browser), so this measures the page itself: load, sort, search, page.
import fs from 'node:fs';
import path from 'node:path';
import { ROOT, assert, browser, eq, run, watchedPage, within } from './harness.mjs';

const ORIGIN = 'http://lockgate.test';
const N = 10000;
const PAGE = 1000;            // the API's page_size maximum
const SLOW_MS = 1500;         // generous: a 2-core machine under load

const T0 = Date.now();
const iso = (ms) => new Date(ms).toISOString();
const locks = [];
for (let i = 0; i < N; i++) {
	const acq = T0 - (i % 5000) * 1000;
	locks.push({
		name: 'fleet/host-' + String(i).padStart(5, '0'), owner: 'svc-' + (i % 37),
		holder: i % 3 ? 'https://ci.example/job/' + i : 'runner-' + i,
		purpose: 'task ' + (i * 7919 % 10007), labels: { shard: String(i % 16) }, claims: {},
		fencing_token: String(1000000 + (i * 104729) % N), acquired_at: iso(acq),
		refreshed_at: iso(T0 - (i % 60) * 1000), expires_at: iso(T0 + (60 + i % 600) * 1000),
		ttl: 600, expected_duration: 0, overdue: false, state: 'held',
	});
}
const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; " +
    "connect-src 'self'; frame-ancestors 'none'";
const TYPES = { html: 'text/html', js: 'text/javascript', css: 'text/css', svg: 'image/svg+xml' };
let listCalls = 0;

async function route(r) {
	const u = new URL(r.request().url());
	if (u.pathname === '/v1/whoami')
		return r.fulfill({ status: 200, contentType: 'application/json',
		    body: JSON.stringify({ owner: 'ops', admin: false, public_read: false }) });
	if (u.pathname === '/v1/locks') {
		listCalls++;
		const start = Number(u.searchParams.get('page_token') || 0);
		const etag = '"p' + start + '"';
		if (r.request().headers()['if-none-match'] === etag)
			return r.fulfill({ status: 304, headers: { ETag: etag } });
		const next = start + PAGE < N ? String(start + PAGE) : null;
		return r.fulfill({ status: 200, contentType: 'application/json', headers: { ETag: etag },
		    body: JSON.stringify({ locks: locks.slice(start, start + PAGE), next_page_token: next, now: iso(Date.now()) }) });
	}
	const file = u.pathname === '/' ? 'index.html' : u.pathname.slice(1);
	const p = path.join(ROOT, 'web', path.basename(file));
	if (!fs.existsSync(p))
		return r.fulfill({ status: 404, body: '' });
	return r.fulfill({ status: 200, headers: { 'Content-Type': TYPES[file.split('.').pop()] || 'text/plain',
	    'Content-Security-Policy': CSP }, body: fs.readFileSync(p) });
}

let page;
const timed = async (what, action, done) => {
	const t0 = Date.now();
	await action();
	await within(10000, done, what);
	const ms = Date.now() - t0;
	console.log(`    ${what}: ${ms} ms`);
	assert(ms < SLOW_MS, what + ' took ' + ms + ' ms');
};

await run('scale', [
	['load 10,000 locks', async () => {
		const ctx = await browser();
		await ctx.route(ORIGIN + '/**', route);
		page = await watchedPage(ctx);
		await page.addInitScript(() => sessionStorage.setItem('lockgate.token', 'x.y.z'));
		const t0 = Date.now();
		await page.goto(ORIGIN + '/');
		await within(10000, async () => /of 10000/.test(await page.textContent('#summary')), 'summary of 10000');
		console.log(`    first full render: ${Date.now() - t0} ms`);
		eq(await page.$$eval('#rows tr', (r) => r.length), 50, 'one page of rows rendered');
	}],
	['sort 10,000 by expiry', async () => {
		await timed('sort by expires', () => page.click('th[data-key="expires"] button'),
		    async () => (await page.textContent('#rows tr:first-child td.name')) === 'fleet/host-00000');
	}],
	['search 10,000', async () => {
		await timed('search', () => page.fill('#search', 'host-0999'),
		    async () => /of 10 \(filtered/.test(await page.textContent('#summary')));
		await page.fill('#search', '');
	}],
	['page through', async () => {
		await timed('next page', () => page.click('#next'),
		    async () => /^51–100 of 10000/.test(await page.textContent('#summary')));
		await timed('250 rows a page', () => page.selectOption('#pagesize', '250'),
		    async () => (await page.$$eval('#rows tr', (r) => r.length)) === 250);
	}],
	['polls are cheap when nothing changed', async () => {
		const before = listCalls;
		const t0 = Date.now();
		await within(5000, async () => listCalls >= before + 30, '3 polls');
		// one poll = 10 requests (10 pages), each a 304 here
		const polls = (listCalls - before) / (N / PAGE);
		console.log(`    ${polls} polls of ${N / PAGE} pages in ${Date.now() - t0} ms`);
		const ticks = await page.evaluate(async () => {
			const t = performance.now();
			await new Promise((r) => setTimeout(r, 1000));
			return performance.now() - t;
		});
		assert(ticks < 1500, 'the page is busy: a 1 s timer took ' + ticks + ' ms');
		page.check();
	}],
]);
