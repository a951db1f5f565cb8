// test_layout.mjs (issue 25, 5, and grouping): with 27 locks, long text
// and slashes in names: a 1,000-character purpose is clamped with an
// expander, names break only at '/', label chips never mid-word, the header
// row stays on screen, a phone gets a card with the state first and no
// empty lines; grouping by the first name segment collapses; on file://,
// with 16-digit fencing tokens, 1280 px still needs no sideways scroll.
// Screenshots at 1280 and 390 px, light and dark, in test-artifacts/.
import fs from 'node:fs';
import path from 'node:path';
import {
	ARTIFACTS, assert, browser, eq, run, sleep, startLockgate, token, watchedPage, within,
} from './harness.mjs';
import { seed27 } from './seed27.mjs';

const SECRET = 'browser-test-secret-0123456789abcdef';
const root = token(SECRET, 'root', true);
const LONG = 'prod/payments/rollout';
let lg, ctx, page;

const row = (n) => `#rows tr[data-name="${n}"]`;

async function open(w, h, scheme, query = '') {
	const p = await watchedPage(ctx);
	await p.setViewportSize({ width: w, height: h });
	await p.emulateMedia({ colorScheme: scheme });
	await p.goto(lg.url + '/');
	await p.evaluate((t) => sessionStorage.setItem('lockgate.token', t), root);
	await p.goto(lg.url + '/' + query);
	await within(5000, async () => (await p.$$eval('#rows tr[data-name]', (r) => r.length)) >= 20, 'rows');
	await sleep(1200); // the expired and overdue ones settle
	return p;
}

// A full page from the top (sticky parts are drawn where the window is).
async function shot(p, name, fullPage = true) {
	if (fullPage)
		await p.evaluate(() => window.scrollTo(0, 0));
	await p.screenshot({ path: path.join(ARTIFACTS, name), fullPage });
}

// Line boxes of the text in SEL: where each line starts, as text.
function lineStarts(sel) {
	return page.$eval(sel, (e) => {
		const r = document.createRange(), out = [];
		const w = document.createTreeWalker(e, NodeFilter.SHOW_TEXT);
		let top = null;
		for (let n = w.nextNode(); n; n = w.nextNode())
			for (let i = 0; i < n.data.length; i++) {
				r.setStart(n, i);
				r.setEnd(n, i + 1);
				const t = r.getClientRects()[0];
				if (t && (top === null || t.top > top + 2)) {
					out.push(n.data.slice(i));
					top = t.top;
				}
			}
		return out;
	});
}

await run('layout', [
	['start with the 27 locks', async () => {
		fs.mkdirSync(ARTIFACTS, { recursive: true });
		lg = await startLockgate({ LOCKGATE_JWT_SECRET: SECRET, LOCKGATE_LINK_HOSTS: 'ci.example' });
		await seed27(lg, root);
		ctx = await browser();
		page = await open(1280, 800, 'light');
	}],

	['a 1,000-character purpose is clamped, with an expander', async () => {
		const h = await page.$eval(`${row(LONG)} td.purpose`, (e) => e.getBoundingClientRect().height);
		assert(h < 120, 'the long purpose makes a ' + h + ' px cell');
		const b = `${row(LONG)} td.purpose button.more`;
		eq(await page.getAttribute(b, 'aria-expanded'), 'false', 'expander');
		await page.click(b);
		const h2 = await page.$eval(`${row(LONG)} td.purpose`, (e) => e.getBoundingClientRect().height);
		assert(h2 > h * 3, 'expanded: ' + h + ' -> ' + h2);
		await sleep(1100); // a tick and a poll keep it open
		eq(await page.getAttribute(b, 'aria-expanded'), 'true', 'still open after a tick');
		await page.click(b);
		eq(await page.$(`${row('ci/runner-00')} td.purpose button.more`), null, 'short text has no expander');
	}],

	['names break only after a "/"; chips never mid-word', async () => {
		const lines = await lineStarts(`${row('staging/payments/deploy')} td.name button`);
		for (const l of lines.slice(1))
			assert(/^(payments\/|deploy)/.test(l), 'a name line starts mid-segment: ' + JSON.stringify(lines));
		for (const sel of await page.$$eval('#rows .chip:not(.long)', (c) => c.map((_, i) => i))) {
			const starts = await page.$$eval('#rows .chip:not(.long)', (c, i) => {
				const e = c[i], r = document.createRange(), out = [];
				const txt = e.textContent;
				let top = null, pos = 0;
				const w = document.createTreeWalker(e, NodeFilter.SHOW_TEXT);
				for (let n = w.nextNode(); n; n = w.nextNode())
					for (let j = 0; j < n.data.length; j++, pos++) {
						r.setStart(n, j);
						r.setEnd(n, j + 1);
						const t = r.getClientRects()[0];
						if (t && top !== null && t.top > top + 2)
							out.push(txt[pos - 1]);
						if (t)
							top = t.top;
					}
				return out;
			}, sel);
			for (const before of starts)
				assert(/[-= ]/.test(before), 'a chip breaks mid-word (after ' + JSON.stringify(before) + ')');
		}
		const m = await page.evaluate(() => document.documentElement.scrollWidth);
		assert(m <= 1280, 'the page scrolls sideways at 1280 px: ' + m);
		await shot(page, 'oncall-desktop-light.png');
	}],

	['the header row stays on screen when scrolled', async () => {
		await page.evaluate(() => window.scrollTo(0, document.body.scrollHeight));
		const top = await page.$eval('thead th', (e) => e.getBoundingClientRect().top);
		const stickyBottom = await page.$eval('#sticky', (e) => e.getBoundingClientRect().bottom);
		assert(top >= 0 && top < 200, 'table header top at ' + top);
		assert(Math.abs(top - stickyBottom) <= 2, 'table header not under the page header: ' +
		    top + ' vs ' + stickyBottom);
		await shot(page, 'oncall-desktop-scrolled.png', false);
		await page.evaluate(() => window.scrollTo(0, 0));
	}],

	['grouping by the first segment, collapsible', async () => {
		await page.selectOption('#group', '1');
		const groups = await page.$$eval('#rows tr.group', (g) => g.map((x) => x.dataset.group));
		eq([...groups].sort().join(), 'ci/,ops/,prod/,staging/,tmp/,very-long-service-name-for-the-batch-pipeline/',
		    'groups');
		eq(groups[0], 'tmp/', 'the group with the most urgent lock first');
		const prod = await page.textContent('#rows tr.group[data-group="prod/"]');
		assert(/6 locks · 2 overdue/.test(prod), 'group header counts: ' + prod);
		await page.click('#rows tr.group[data-group="ci/"] button');
		eq(await page.$$eval('#rows tr[data-name^="ci/"]', (r) => r.length), 0, 'collapsed ci/');
		eq(await page.getAttribute('#rows tr.group[data-group="ci/"] button', 'aria-expanded'), 'false', 'aria');
		await shot(page, 'oncall-desktop-grouped.png');
		await page.click('#rows tr.group[data-group="ci/"] button');
		eq(await page.$$eval('#rows tr[data-name^="ci/"]', (r) => r.length), 15, 'expanded ci/');
		await page.selectOption('#group', '0');
	}],

	['dark desktop', async () => {
		const p = await open(1280, 800, 'dark');
		await shot(p, 'oncall-desktop-dark.png');
		p.check();
		await p.close();
	}],

	['a phone: compact cards, state first, no empty lines', async () => {
		for (const scheme of ['light', 'dark']) {
			const p = await open(390, 844, scheme);
			eq(await p.evaluate(() => document.documentElement.scrollWidth), 390, 'sideways scroll');
			const card = await p.$eval('#rows tr[data-name="ci/runner-00"]', (tr) => {
				const shown = [...tr.children].filter((c) => getComputedStyle(c).display !== 'none');
				const first = shown.map((c) => [c, c.getBoundingClientRect()])
				    .sort((a, b) => a[1].top - b[1].top || a[1].left - b[1].left)[0][0];
				return { first: first.className, empty: shown.filter((c) => !c.textContent.trim()).length,
				    height: tr.getBoundingClientRect().height, labels: !!tr.querySelector('td.labels:not([data-empty])') };
			});
			eq(card.first, 'state', 'the first line of a card');
			eq(card.empty, 0, 'empty lines in a card');
			eq(card.labels, false, 'a labels line without labels');
			assert(card.height < 170, 'the card is not compact: ' + card.height + ' px');
			await shot(p, `oncall-phone-${scheme}.png`, false);
			await shot(p, `oncall-phone-${scheme}-full.png`);
			await p.click('#rows tr[data-name="prod/db/migrate"] td.name button');
			await p.waitForSelector('#detaildlg[open]');
			await shot(p, `oncall-phone-${scheme}-detail.png`, false);
			p.check();
			await p.close();
		}
		page.check();
		await lg.stop();
	}],

	['on file://, whose fencing tokens have 16 digits, no sideways scroll at 1280 px', async () => {
		lg = await startLockgate({ LOCKGATE_JWT_SECRET: SECRET, LOCKGATE_LINK_HOSTS: 'ci.example' }, [], 'file');
		await seed27(lg, root);
		const p = await open(1280, 800, 'light');
		const t = await p.$eval(`${row(LONG)} td.token`, (e) => e.textContent.replace(/\D/g, ''));
		assert(t.length >= 16, 'a file:// token of ' + t.length + ' digits: ' + t);
		const m = await p.evaluate(() => document.documentElement.scrollWidth);
		await shot(p, 'oncall-desktop-file.png');
		assert(m <= 1280, 'the page scrolls sideways at 1280 px on file://: ' + m);
		p.check();
		await p.close();
		await lg.stop();
	}],
]);
