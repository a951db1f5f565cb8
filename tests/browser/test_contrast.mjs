// test_contrast.mjs (issue 25, 7): every button of the page, in both
// themes, enabled and disabled, has text contrast of at least 4.5:1 (WCAG
// AA), computed from the page's own styles: the button's colour against
// the first opaque background behind it (translucent ones blended).
import {
	acquire, assert, browser, eq, run, startLockgate, token, watchedPage, within,
} from './harness.mjs';

const SECRET = 'browser-test-secret-0123456789abcdef';
const root = token(SECRET, 'root', true);
const MIN = 4.5;
let lg, ctx, page;

// In the page: [{id, text, ratio, fg, bg}] for every button, each also
// measured disabled and enabled.
function measure() {
	const rgba = (s) => {
		const m = /rgba?\(([^)]+)\)/.exec(s);
		if (!m)
			return [0, 0, 0, 0];
		const p = m[1].split(/[ ,/]+/).filter(Boolean).map(Number);
		return [p[0], p[1], p[2], p.length > 3 ? p[3] : 1];
	};
	const over = (top, under) => top.slice(0, 3).map((c, i) => c * top[3] + under[i] * (1 - top[3])).concat(1);
	const bgOf = (e) => {
		const layers = [];
		for (let n = e; n; n = n.parentElement) {
			const c = rgba(getComputedStyle(n).backgroundColor);
			if (c[3] > 0)
				layers.push(c);
			if (c[3] >= 1)
				break;
		}
		let bg = [255, 255, 255, 1];
		if (layers.length && layers[layers.length - 1][3] >= 1)
			bg = layers.pop();
		while (layers.length)
			bg = over(layers.pop(), bg);
		return bg;
	};
	const lum = (c) => {
		const [r, g, b] = c.slice(0, 3).map((v) => {
			v /= 255;
			return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4;
		});
		return 0.2126 * r + 0.7152 * g + 0.0722 * b;
	};
	const ratio = (a, b) => {
		const x = lum(a), y = lum(b);
		return (Math.max(x, y) + 0.05) / (Math.min(x, y) + 0.05);
	};
	const out = [];
	const one = (b, how) => {
		const bg = bgOf(b);
		const fgRaw = rgba(getComputedStyle(b).color);
		const op = Number(getComputedStyle(b).opacity);
		// a faded button: its text blends into what is behind it
		const fg = over([...fgRaw.slice(0, 3), fgRaw[3] * op], bg);
		out.push({ id: (b.id || b.className || b.closest('[id]').id) + ' "' +
		    b.textContent.trim().slice(0, 30) + '" ' + how,
		    ratio: Math.round(ratio(fg, bg) * 100) / 100,
		    fg: fg.map(Math.round).join(','), bg: bg.map(Math.round).join(',') });
	};
	for (const b of document.querySelectorAll('button')) {
		const was = b.disabled;
		for (const d of [false, true]) {
			b.disabled = d;
			one(b, d ? 'disabled' : 'enabled');
		}
		b.disabled = was;
	}
	return { out, selfTest: ratio([0xe5, 0x53, 0x4b, 1], [255, 255, 255, 1]) };
}

async function check(scheme) {
	await page.emulateMedia({ colorScheme: scheme });
	const { out, selfTest } = await page.evaluate(measure);
	// the measure itself: the old dark Force release (white on #e5534b)
	assert(Math.abs(selfTest - 3.7) < 0.05, 'contrast formula: ' + selfTest);
	const bad = out.filter((r) => r.ratio < MIN);
	console.log(`    ${scheme}: ${out.length} buttons×states, lowest ` +
	    Math.min(...out.map((r) => r.ratio)));
	eq(bad.map((r) => `${r.id}: ${r.ratio} (${r.fg} on ${r.bg})`).join('\n'), '',
	    scheme + ' buttons under ' + MIN + ':1');
	assert(out.some((r) => /force/.test(r.id)), 'the Force release button was measured');
	assert(out.length >= 40, 'too few buttons measured: ' + out.length);
}

await run('contrast', [
	['a page with every kind of button', async () => {
		lg = await startLockgate({ LOCKGATE_JWT_SECRET: SECRET });
		await acquire(lg, root, 'prod/deploy', { ttl: 600, holder: 'h', purpose: 'p'.repeat(300) });
		await acquire(lg, root, 'prod/late', { ttl: 600, expected_duration: 1 });
		await acquire(lg, root, 'prod/soon', { ttl: 6 });
		await acquire(lg, root, 'prod/gone', { ttl: 2 });
		ctx = await browser();
		page = await watchedPage(ctx);
		await page.goto(lg.url + '/?group=1');
		await page.evaluate((t) => sessionStorage.setItem('lockgate.token', t), root);
		await page.reload();
		await within(5000, async () => (await page.$$eval('#counts button[data-some="true"]', (b) => b.length)) >= 4,
		    'coloured state counts');
		await page.click('#counts button[data-state="overdue"]'); // a pressed one
		await page.click('#counts button[data-state="overdue"]');
		await page.waitForSelector('#rows button.more');
		await page.click('#rows tr[data-name="prod/deploy"] td.name button');
		await page.waitForSelector('#detaildlg[open]');
		await within(3000, async () => !(await page.isDisabled('#force')), 'force enabled');
	}],
	['light theme', () => check('light')],
	['dark theme', () => check('dark')],
	['the page is still sound', async () => {
		page.check();
		await lg.stop();
	}],
]);
