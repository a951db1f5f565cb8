// test_token_expiry.mjs (issue 25, 1): a token that expires while a detail
// is open says so, and the page states nothing it does not know: the lock is
// not called "not held", the old identity is not shown as admin, force
// release is off, and the rows are kept as "last seen".  On a public-read
// server a mistyped token keeps the public table, and Sign in and Sign out
// never show together.
import crypto from 'node:crypto';
import {
	acquire, assert, browser, eq, run, sleep, startLockgate, token, watchedPage, within,
} from './harness.mjs';

const SECRET = 'browser-test-secret-0123456789abcdef';
const alice = token(SECRET, 'alice');
const root = token(SECRET, 'root', true);
let lg, ctx, page;

// An admin token that expires in SEC seconds.
function shortToken(sub, sec) {
	const now = Math.floor(Date.now() / 1000);
	const b = (o) => Buffer.from(JSON.stringify(o)).toString('base64url');
	const head = b({ alg: 'HS256', typ: 'JWT' }) + '.' +
	    b({ sub, admin: true, iat: now, nbf: now - 5, exp: now + sec });
	return head + '.' + crypto.createHmac('sha256', SECRET).update(head).digest('base64url');
}

const visible = (sel) => page.isVisible(sel);

await run('token expiry', [
	['start lockgate (no leeway) and seed', async () => {
		lg = await startLockgate({ LOCKGATE_JWT_SECRET: SECRET, LOCKGATE_JWT_LEEWAY: '0' });
		await acquire(lg, alice, 'prod/deploy', { ttl: 600, holder: 'job-1', purpose: 'deploy' });
		await acquire(lg, alice, 'ci/nightly', { ttl: 600, holder: 'runner-7' });
	}],

	['signed in as an admin with a short token, a detail open', async () => {
		ctx = await browser();
		page = await watchedPage(ctx);
		const tok = shortToken('root', 6);
		await page.goto(lg.url + '/');
		await page.evaluate((t) => sessionStorage.setItem('lockgate.token', t), tok);
		await page.evaluate(() => { location.hash = '#/locks/prod/deploy'; });
		await page.reload();
		await page.waitForSelector('#detaildlg[open]', { timeout: 5000 });
		await within(3000, async () => (await page.getAttribute('#detaildlg', 'data-status')) === 'held',
		    'detail held');
		eq(await page.textContent('#who'), 'root (admin)', 'who');
		eq(await page.isDisabled('#force'), false, 'force for the admin');
	}],

	['the token expires: the page says so and claims nothing it does not know', async () => {
		await within(12000, async () => (await page.getAttribute('#detaildlg', 'data-status')) === 'unknown',
		    'detail becomes unknown after the token expires');
		const note = await page.textContent('#detailnote');
		assert(/refused/.test(note), 'the note says why: ' + note);
		assert(!/not held/i.test(note), 'the note calls a held lock not held: ' + note);
		assert(/last state seen, at \d\d:\d\d:\d\d/.test(note), 'the note dates what is shown: ' + note);
		const fields = await page.textContent('#detailfields');
		assert(/unknown \(last seen held\)/.test(fields), 'State field: ' + fields);
		assert(fields.includes('job-1'), 'the last state seen is still shown');
		eq(await page.isDisabled('#force'), true, 'force release after the token expired');
		assert(!/admin/.test(await page.textContent('#who')), 'header still says admin: ' +
		    await page.textContent('#who'));
		eq(await page.textContent('#who'), 'token refused', 'header names the refusal');
		eq(await visible('#signout'), false, 'Sign out next to a refused token');
		eq(await visible('#signin'), true, 'Sign in offered');
		eq(await visible('#tokendlg'), false, 'a sign-in dialog thrown over the detail');
		// the table behind: kept, marked stale, not wiped
		eq(await page.$$eval('#rows tr', (r) => r.length), 2, 'rows kept');
		eq(await page.getAttribute('body', 'data-stale'), 'true', 'rows marked stale');
		assert(/refused/.test(await page.textContent('#banner')), 'banner says the token was refused');
		// the countdown stopped: Expires shows the time last seen, no "(9m 50s)"
		const expires = await page.$$eval('#detailfields dt', (dts) => {
			const dt = dts.find((d) => d.textContent === 'Expires');
			return dt && dt.nextElementSibling.textContent;
		});
		assert(/^\S+Z$/.test(expires), 'Expires still counts down: ' + expires);
	}],

	['signing in again makes it live and actionable', async () => {
		await page.click('#detailclose');
		await page.click('#banner button');
		await page.waitForSelector('#tokendlg[open]', { timeout: 2000 });
		await page.fill('#tokeninput', root);
		await page.click('#tokenok');
		await within(4000, async () => (await page.getAttribute('body', 'data-stale')) === 'false', 'fresh again');
		eq(await page.textContent('#who'), 'root (admin)', 'who after signing in');
		eq(await visible('#signin'), false, 'Sign in while signed in');
		eq(await visible('#signout'), true, 'Sign out while signed in');
		page.check();
		await page.close();
		await lg.stop();
	}],

	['public read: a mistyped token keeps the public table', async () => {
		lg = await startLockgate({ LOCKGATE_JWT_SECRET: SECRET, LOCKGATE_PUBLIC_READ: 'true' });
		await acquire(lg, alice, 'pub/lock', { ttl: 600, holder: 'h', purpose: 'public' });
		page = await watchedPage(ctx);
		await page.goto(lg.url + '/');
		await page.waitForSelector('#rows tr[data-name="pub/lock"]', { timeout: 4000 });
		eq(await page.textContent('#who'), 'public read', 'who');
		await page.click('#signin');
		await page.fill('#tokeninput', 'mistyped.token.here');
		await page.click('#tokenok');
		await within(3000, async () => /refused/.test(await page.textContent('#tokenwhy')) &&
		    await visible('#tokendlg'), 'the dialog comes back saying the token was refused');
		await page.click('#tokencancel');
		await sleep(1500); // a poll or two
		eq(await page.$$eval('#rows tr', (r) => r.length), 1, 'the public table was blanked');
		eq(await page.getAttribute('body', 'data-stale'), 'false', 'public data is live');
		eq(await page.textContent('#who'), 'token refused · public read', 'who');
		eq(await visible('#signin'), true, 'Sign in');
		eq(await visible('#signout'), false, 'Sign in and Sign out together');
		assert(/refused/.test(await page.textContent('#banner')), 'banner says the token was refused');
		page.check();
		await lg.stop();
	}],
]);
