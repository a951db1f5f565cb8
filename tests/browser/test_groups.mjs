// test_groups.mjs (issue 22): a semaphore's row shows its count against
// the limit ("2 of 3"), a shared lock's its readers ("3 shared"); the
// detail lists every holder (owner, holder, purpose, expiry, fencing
// token), and an admin's force release acts on the one lease chosen,
// sending its fencing token: the other leases stay.  An exclusive lock
// shows as before: no count, no holder list, the one Force release button.
// Someone who is no admin sees the leases but cannot force-release them.
import {
	acquire, assert, browser, call, eq, run, startLockgate, token, watchedPage, within,
} from './harness.mjs';

const SECRET = 'browser-test-secret-0123456789abcdef';
const alice = token(SECRET, 'alice');
const bob = token(SECRET, 'bob');
const root = token(SECRET, 'root', true);
let lg, ctx, page, aliceLease, bobLease;

async function holderCell(name) {
	return page.$eval(`#rows tr[data-name="${name}"] td.holder`, (td) => ({
		text: td.textContent,
		count: td.querySelector('.holdcount') ? td.querySelector('.holdcount').textContent : null,
	}));
}

// The detail's holder list: one object per item, its fields by name.
async function holders() {
	return page.evaluate(() => {
		const box = document.getElementById('holders');
		if (box.hidden)
			return null;
		return [...box.querySelectorAll('li')].map((li) => {
			const f = {};
			for (const dt of li.querySelectorAll('dt'))
				f[dt.textContent] = dt.nextElementSibling.textContent;
			const b = li.querySelector('button');
			f.button = b ? { token: b.dataset.token, enabled: !b.disabled } : null;
			return f;
		});
	});
}

async function open(name) {
	await page.click(`#rows tr[data-name="${name}"] td.name button`);
	await page.waitForSelector('#detaildlg[open]', { timeout: 2000 });
	await within(3000, async () => (await page.$eval('#detaildlg',
	    (d) => d.dataset.status)) === 'held', 'detail of ' + name + ' held');
}

async function close() {
	await page.click('#detailclose');
	await within(2000, async () => !(await page.$('#detaildlg[open]')), 'detail closed');
}

await run('groups on the dashboard', [
	['start, take a semaphore, a shared lock and an exclusive lock', async () => {
		lg = await startLockgate({ LOCKGATE_JWT_SECRET: SECRET });
		aliceLease = await acquire(lg, alice, 'stage', { limit: 3, ttl: 600,
		    holder: 'job-a', purpose: 'deploy a' });
		bobLease = await acquire(lg, bob, 'stage', { limit: 3, ttl: 600,
		    holder: 'job-b', purpose: 'deploy b' });
		for (const h of ['r1', 'r2', 'r3'])
			await acquire(lg, alice, 'repo', { mode: 'shared', ttl: 600, holder: h });
		await acquire(lg, alice, 'solo', { ttl: 600, holder: 'only-one' });
		ctx = await browser();
		page = await watchedPage(ctx);
		await page.goto(lg.url + '/');
		await page.evaluate((t) => sessionStorage.setItem('lockgate.token', t), root);
		await page.reload();
		await within(3000, () => page.$('#rows tr[data-name="solo"]'), 'rows');
	}],

	['rows: "2 of 3", "3 shared", and the exclusive lock as before', async () => {
		const s = await holderCell('stage');
		eq(s.count, '2 of 3', 'semaphore count');
		assert(s.text.includes('job-a'), 'semaphore row names its first holder: ' + s.text);
		eq((await holderCell('repo')).count, '3 shared', 'shared count');
		const x = await holderCell('solo');
		eq(x.count, null, 'an exclusive lock has no count');
		eq(x.text, 'only-one', 'an exclusive lock\'s holder cell');
	}],

	['the semaphore\'s detail lists each holder, one force release each', async () => {
		await open('stage');
		const hs = await holders();
		assert(hs, 'no holder list');
		eq(hs.length, 2, 'holders listed');
		eq(hs[0].Owner, 'alice', 'first owner');
		eq(hs[0].Holder, 'job-a', 'first holder');
		eq(hs[0].Purpose, 'deploy a', 'first purpose');
		eq(hs[1].Holder, 'job-b', 'second holder');
		assert(hs[1].Expires.startsWith(bobLease.expires_at), 'expiry: ' + hs[1].Expires);
		eq(hs[0]['Fencing token'], aliceLease.fencing_token, 'first token');
		eq(hs[1].button.token, bobLease.fencing_token, 'second button\'s lease');
		assert(hs[0].button.enabled && hs[1].button.enabled, 'admin buttons enabled');
		eq(await page.$eval('#force', (b) => b.hidden), true, 'no whole-lock button');
		const dd = await page.evaluate(() => {
			for (const dt of document.querySelectorAll('#detailfields dt'))
				if (dt.textContent === 'Holders')
					return dt.nextElementSibling.textContent;
			return null;
		});
		eq(dd, '2 of 3', 'Holders field');
		page.check();
	}],

	['force release of one lease: its token is sent, the other stays', async () => {
		await page.click(`#holders button[data-token="${bobLease.fencing_token}"]`);
		await page.waitForSelector('#confirmdlg[open]', { timeout: 2000 });
		const text = await page.$eval('#confirmtext', (p) => p.textContent);
		assert(text.includes('job-b') && text.includes(bobLease.fencing_token),
		    'confirmation names the lease: ' + text);
		await page.fill('#reason', 'stuck job b');
		await page.click('#confirmok');
		await within(3000, async () => {
			const r = await call(lg, 'GET', '/v1/locks/stage', alice);
			return r.status === 200 && r.body.holders.length === 1;
		}, 'one lease left on the server');
		const r = await call(lg, 'GET', '/v1/locks/stage', alice);
		eq(r.body.holders[0].fencing_token, aliceLease.fencing_token, 'alice\'s lease stayed');
		const ref = await call(lg, 'POST', '/v1/locks/stage:refresh', bob,
		    { lease_id: bobLease.lease_id });
		eq(ref.status, 404, 'bob\'s lease is gone');
		await within(3000, async () => {
			const hs = await holders();
			return hs && hs.length === 1 && hs[0].Holder === 'job-a';
		}, 'the detail shows the one lease left');
		const msg = await page.$eval('#detailmsg', (m) => m.textContent);
		assert(msg.includes(bobLease.fencing_token), 'message: ' + msg);
		eq(await page.$eval('#detaildlg', (d) => d.dataset.status), 'held', 'still held');
		await within(3000, async () => (await holderCell('stage')).count === '1 of 3',
		    'the row counts 1 of 3');
		await close();
	}],

	['the exclusive lock\'s detail: no holder list, the one button', async () => {
		await open('solo');
		eq(await holders(), null, 'no holder list');
		eq(await page.$eval('#force', (b) => b.hidden || b.disabled), false,
		    'the force release button');
		await close();
		page.check();
	}],

	['signed in as no admin: each lease shown, no force release', async () => {
		await page.evaluate((t) => sessionStorage.setItem('lockgate.token', t), alice);
		await page.reload();
		await within(3000, () => page.$('#rows tr[data-name="stage"]'), 'rows');
		await open('stage');
		const hs = await holders();
		eq(hs.length, 1, 'holders listed');
		eq(hs[0].button.enabled, false, 'a lease\'s force release for a non-admin');
		const hint = await page.$eval('#forcehint', (h) => h.textContent);
		assert(/Only an admin/.test(hint), 'hint: ' + hint);
		page.check();
	}],
]);
