// test_detail_truth.mjs (issue 25, 4): the detail view has one source of
// truth.  After a release or a force release, its note, State field,
// countdown and Force release button all agree ("not held"); a new holder
// taking the lock shows as held again, with the new fencing token.
import {
	acquire, assert, browser, eq, release, run, startLockgate, token, watchedPage, within,
} from './harness.mjs';

const SECRET = 'browser-test-secret-0123456789abcdef';
const alice = token(SECRET, 'alice');
const root = token(SECRET, 'root', true);
let lg, ctx, page;

async function detail() {
	return page.evaluate(() => {
		const dd = {};
		for (const dt of document.querySelectorAll('#detailfields dt'))
			dd[dt.textContent] = dt.nextElementSibling.textContent;
		const note = document.getElementById('detailnote');
		return {
			status: document.getElementById('detaildlg').dataset.status,
			note: note.hidden ? '' : note.textContent,
			state: dd.State || '', expires: dd.Expires || '', token: dd['Fencing token'] || '',
			force: !document.getElementById('force').disabled,
		};
	});
}

// Every part of the view says the same thing.
function consistent(d) {
	if (d.status === 'held')
		return !d.note && !/^not held/.test(d.state) && /\(\d/.test(d.expires);
	if (d.status === 'gone')
		return /^Not held now/.test(d.note) && /^not held/.test(d.state) &&
		    !/\(/.test(d.expires) && !d.force;
	return false;
}

async function open(name) {
	await page.click(`#rows tr[data-name="${name}"] td.name button`);
	await page.waitForSelector('#detaildlg[open]', { timeout: 2000 });
	await within(3000, async () => (await detail()).status === 'held', 'detail of ' + name + ' held');
}

await run('detail truth', [
	['start and sign in as an admin', async () => {
		lg = await startLockgate({ LOCKGATE_JWT_SECRET: SECRET });
		ctx = await browser();
		page = await watchedPage(ctx);
		await page.goto(lg.url + '/');
		await page.evaluate((t) => sessionStorage.setItem('lockgate.token', t), root);
		await page.reload();
	}],

	['a release by its owner: the open detail says not held, everywhere', async () => {
		const l = await acquire(lg, alice, 'job/one', { ttl: 600, holder: 'h1' });
		await within(3000, () => page.$('#rows tr[data-name="job/one"]'), 'row');
		await open('job/one');
		const d0 = await detail();
		assert(consistent(d0) && d0.force, 'held view: ' + JSON.stringify(d0));
		await release(lg, alice, 'job/one', l.lease_id);
		await within(3000, async () => (await detail()).status === 'gone', 'detail gone');
		const d = await detail();
		assert(consistent(d), 'after a release: ' + JSON.stringify(d));
		assert(/last state seen, at \d\d:\d\d:\d\d/.test(d.note), 'note dates the last state: ' + d.note);
		// and it stays so on later ticks and polls
		await page.waitForTimeout(1500);
		assert(consistent(await detail()), 'later: ' + JSON.stringify(await detail()));
	}],

	['someone takes it again: held, with the new fencing token', async () => {
		const l = await acquire(lg, alice, 'job/one', { ttl: 600, holder: 'h2' });
		await within(3000, async () => (await detail()).status === 'held', 'held again');
		const d = await detail();
		assert(consistent(d), 'held again: ' + JSON.stringify(d));
		eq(d.token, l.fencing_token, 'the new lease shown');
		await page.click('#detailclose');
	}],

	['a force release: at once not held, and never held again from an old poll', async () => {
		await open('job/one');
		await page.click('#force');
		await page.waitForSelector('#confirmdlg[open]', { timeout: 2000 });
		await page.fill('#reason', 'test');
		await page.click('#confirmok');
		await within(3000, async () => (await detail()).status === 'gone', 'gone after force');
		const seen = [];
		for (let i = 0; i < 20; i++) {
			const d = await detail();
			seen.push(d.status);
			assert(consistent(d), 'after force release: ' + JSON.stringify(d));
			await page.waitForTimeout(100);
		}
		assert(seen.every((s) => s === 'gone'), 'flickered: ' + seen.join());
		assert(/You force-released it at \d\d:\d\d:\d\d/.test((await detail()).note), 'note');
		page.check();
		await lg.stop();
	}],
]);
