// firefox_smoke.mjs: a manual check that the dashboard works in Firefox.
// playwright-core's Firefox needs its own patched build (or a newer BiDi than
// Debian's firefox-esr speaks), so this drives firefox-esr over plain
// WebDriver BiDi: open the page against a real lockgate, sign in, check the
// rows, the countdown, HTML-as-text, the detail view, and save
// test-artifacts/dashboard-firefox.png.
//   apt-get install -y firefox-esr
//   node --experimental-websocket tests/browser/firefox_smoke.mjs
// Not part of make test (firefox-esr is not among the test dependencies).
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import {
	ARTIFACTS, acquire, assert, eq, onCleanup, run, sleep, startLockgate, tmpdir,
	token,
} from './harness.mjs';

const FIREFOX = process.env.LG_FIREFOX || '/usr/bin/firefox-esr';
const SECRET = 'firefox-smoke-secret-0123456789abcdef';
const XSS = '<img src=x onerror="window.__xss=1">';
const alice = token(SECRET, 'alice');

let lg, ff, ws, ctxId, seq = 0;
const pending = new Map();

function send(method, params = {}) {
	const id = ++seq;
	ws.send(JSON.stringify({ id, method, params }));
	return new Promise((resolve, reject) => {
		const t = setTimeout(() => reject(new Error(method + ': no answer')), 15000);
		pending.set(id, (m) => {
			clearTimeout(t);
			if (m.type === 'error')
				reject(new Error(method + ': ' + m.error + ' ' + m.message));
			else
				resolve(m.result);
		});
	});
}

// Evaluate EXPR (an expression, may be a promise) in the page; its JSON.
async function js(expr) {
	const r = await send('script.evaluate', {
		expression: 'JSON.stringify(' + expr + ')', target: { context: ctxId },
		awaitPromise: true,
	});
	if (r.type === 'exception')
		throw new Error('page: ' + JSON.stringify(r.exceptionDetails).slice(0, 300));
	return r.result.value === undefined ? undefined : JSON.parse(r.result.value);
}

async function until(ms, expr, what) {
	const t0 = Date.now();
	while (Date.now() - t0 < ms) {
		if (await js(expr))
			return;
		await sleep(100);
	}
	throw new Error(what + ' (not within ' + ms + ' ms)');
}

async function startFirefox() {
	if (typeof WebSocket === 'undefined')
		throw new Error('run with node --experimental-websocket');
	if (!fs.existsSync(FIREFOX))
		throw new Error(FIREFOX + ' is missing (apt-get install -y firefox-esr)');
	const profile = tmpdir('ff');
	ff = spawn(FIREFOX, ['--headless', '--no-remote', '--remote-debugging-port=0',
	    '--profile', profile, '--window-size=1280,800'], {
		env: { ...process.env, HOME: profile, MOZ_CRASHREPORTER_DISABLE: '1' },
		stdio: ['ignore', 'ignore', 'pipe'],
	});
	onCleanup(stopFirefox);
	const url = await new Promise((resolve, reject) => {
		let buf = '';
		const t = setTimeout(() => reject(new Error('firefox did not start')), 20000);
		ff.stderr.on('data', (d) => {
			buf += d;
			const m = buf.match(/WebDriver BiDi listening on (ws:\/\/\S+)/);
			if (m) {
				clearTimeout(t);
				resolve(m[1]);
			}
		});
	});
	ws = new WebSocket(url + '/session');
	await new Promise((resolve, reject) => {
		ws.onopen = resolve;
		ws.onerror = () => reject(new Error('BiDi connection failed'));
	});
	ws.onmessage = (ev) => {
		const m = JSON.parse(ev.data);
		if (m.id && pending.has(m.id)) {
			pending.get(m.id)(m);
			pending.delete(m.id);
		}
	};
	await send('session.new', { capabilities: {} });
	const tree = await send('browsingContext.getTree', {});
	ctxId = tree.contexts[0].context;
}

async function stopFirefox() {
	if (ws && ws.readyState === 1)
		await send('browser.close').catch(() => {});
	if (ff && ff.exitCode === null) {
		await Promise.race([new Promise((r) => ff.on('exit', r)), sleep(5000)]);
		if (ff.exitCode === null)
			process.kill(ff.pid, 'SIGKILL');
	}
}

await run('firefox smoke', [
	['start lockgate and firefox', async () => {
		lg = await startLockgate({ LOCKGATE_JWT_SECRET: SECRET });
		for (const [name, holder] of [['prod/deploy', 'https://ci.example/job/42'],
		    ['ci/nightly', 'runner-7'], ['xss/probe', XSS]])
			await acquire(lg, alice, name, { ttl: 600, holder, purpose: 'smoke ' + name,
			    labels: { env: 'prod' } });
		await startFirefox();
	}],
	['sign in and see the rows', async () => {
		await send('browsingContext.navigate', { context: ctxId, url: lg.url + '/', wait: 'complete' });
		await until(5000, "document.getElementById('tokendlg').open", 'token dialog');
		await js(`(() => { document.getElementById('tokeninput').value = ${JSON.stringify(alice)};
		    document.getElementById('tokenok').click(); return 1; })()`);
		await until(5000, "document.querySelectorAll('#rows tr').length === 3", 'three rows');
		eq(await js("document.querySelector('#rows tr[data-name=\"xss/probe\"] td.holder').textContent"),
		    XSS, 'HTML holder shown as text');
		eq(await js("document.querySelectorAll('#rows img').length"), 0, 'img from data');
		eq(await js("document.querySelector('#rows tr[data-name=\"prod/deploy\"] td.holder a').href"),
		    'https://ci.example/job/42', 'holder link');
		eq(await js("sessionStorage.getItem('lockgate.token') !== null && document.cookie === ''"),
		    true, 'token in sessionStorage, no cookie');
	}],
	['the countdown ticks and the detail opens', async () => {
		const sel = "document.querySelector('#rows tr[data-name=\"prod/deploy\"] td.expires').textContent";
		const a = await js(sel);
		await sleep(2100);
		assert(a !== await js(sel), 'countdown did not move: ' + a);
		await js("(document.querySelector('button[data-lock=\"prod/deploy\"]').click(), 1)");
		await until(3000, "document.getElementById('detaildlg').open && /acquired/.test(document.getElementById('timeline').textContent)",
		    'detail with timeline');
		eq(await js('window.__xss'), undefined, 'injected code ran');
	}],
	['screenshot', async () => {
		const shot = await send('browsingContext.captureScreenshot', { context: ctxId });
		fs.mkdirSync(ARTIFACTS, { recursive: true });
		fs.writeFileSync(path.join(ARTIFACTS, 'dashboard-firefox.png'), Buffer.from(shot.data, 'base64'));
		await stopFirefox();
		await lg.stop();
	}],
]);
