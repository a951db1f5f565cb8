// test_overdue.mjs (issue 25, 3): overdue is easy to find: counts by state
// that filter when clicked, "overdue by Ns (expected Ms)", a default sort
// by urgency that orders by lateness, and a search for "overdue" finds them.
import {
	acquire, assert, browser, eq, run, sleep, startLockgate, token, watchedPage, within,
} from './harness.mjs';

const SECRET = 'browser-test-secret-0123456789abcdef';
const root = token(SECRET, 'root', true);
let lg, ctx, page;

const rowNames = () => page.$$eval('#rows tr[data-name]', (trs) => trs.map((t) => t.dataset.name));
const count = (k) => page.$eval(`#counts button[data-state="${k}"] b`, (b) => Number(b.textContent));

await run('overdue', [
	['seed: overdue by different amounts, expiring, expired, held', async () => {
		lg = await startLockgate({ LOCKGATE_JWT_SECRET: SECRET });
		await acquire(lg, root, 'a/held-1', { ttl: 900 });
		await acquire(lg, root, 'a/held-2', { ttl: 900 });
		await acquire(lg, root, 'b/late-least', { ttl: 900, expected_duration: 5 });
		await acquire(lg, root, 'c/late-most', { ttl: 900, expected_duration: 1 });
		await acquire(lg, root, 'd/late-mid', { ttl: 900, expected_duration: 3 });
		await acquire(lg, root, 'f/expired', { ttl: 2 });
		ctx = await browser();
		page = await watchedPage(ctx);
		await page.goto(lg.url + '/');
		await page.evaluate((t) => sessionStorage.setItem('lockgate.token', t), root);
		await page.reload();
		await within(4000, async () => (await rowNames()).length === 6, 'six rows');
	}],

	['counts by state', async () => {
		// b/late-least becomes overdue 5 s after it was taken
		await within(8000, async () => await count('overdue') === 3, 'three overdue');
		// expiring soon: under 5 s left of 7 s, for a few seconds
		await acquire(lg, root, 'e/soon', { ttl: 7 });
		await within(4000, async () => await count('soon') === 1, 'one expiring soon');
		eq(await count(''), 7, 'all');
		eq(await count('held'), 2, 'held');
		eq(await count('soon'), 1, 'expiring soon');
		eq(await count('expired'), 1, 'expired, awaiting takeover');
	}],

	['default sort is urgency: expired, then overdue by lateness, then expiring', async () => {
		eq(await page.getAttribute('th[data-key="state"]', 'aria-sort'), 'ascending', 'State column sorts');
		eq(await page.inputValue('#sort'), 'urgency', 'Sort menu');
		eq((await rowNames()).join(), 'f/expired,c/late-most,d/late-mid,b/late-least,e/soon,a/held-1,a/held-2',
		    'urgency order');
	}],

	['how late, and what was expected', async () => {
		const t = await page.textContent('#rows tr[data-name="c/late-most"] td.state');
		const m = /^overdue by (\d+)s \(expected 1s\)$/.exec(t);
		assert(m, 'state text: ' + t);
		await sleep(2100);
		const t2 = await page.textContent('#rows tr[data-name="c/late-most"] td.state');
		const m2 = /^overdue by (\d+)s/.exec(t2);
		assert(m2 && Number(m2[1]) >= Number(m[1]) + 1, 'lateness grows: ' + t + ' -> ' + t2);
		assert(!/overdue/.test(await page.textContent('#rows tr[data-name="a/held-1"] td.state')), 'held is not overdue');
	}],

	['a count filters when clicked, and again shows all', async () => {
		await page.click('#counts button[data-state="overdue"]');
		eq((await rowNames()).join(), 'c/late-most,d/late-mid,b/late-least', 'overdue only');
		eq(await page.getAttribute('#counts button[data-state="overdue"]', 'aria-pressed'), 'true', 'pressed');
		assert(/state=overdue/.test(page.url()), 'filter in the URL: ' + page.url());
		await page.click('#counts button[data-state="overdue"]');
		eq((await rowNames()).length, 7, 'all again');
		await page.click('#counts button[data-state="expired"]');
		eq((await rowNames()).join(), 'f/expired', 'expired only');
		await page.click('#counts button[data-state=""]');
		eq((await rowNames()).length, 7, 'All');
	}],

	['searching "overdue" finds them', async () => {
		await page.fill('#search', 'overdue');
		await within(1000, async () => (await rowNames()).join() === 'c/late-most,d/late-mid,b/late-least',
		    'search overdue');
		await page.fill('#search', '');
		page.check();
		await lg.stop();
	}],
]);
