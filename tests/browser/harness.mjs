// harness.mjs: what the dashboard tests share.  Starts real lockgate
// instances on 127.0.0.1 (free ports, stopped by PID), mints HS256 tokens,
// calls the API, launches Debian's chromium with a fresh profile, and runs
// named steps with a watchdog.  Everything started is stopped and every temp
// dir removed on the way out, whatever happens.
import { spawn } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { chromium } from 'playwright-core';

export const ROOT = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../..');
export const ARTIFACTS = path.join(ROOT, 'test-artifacts');
const WATCHDOG_MS = 120000;      // the whole test file
const START_MS = 15000;          // one lockgate to answer /healthz
const STOP_MS = 9000;            // SIGTERM to exit (the server drains <= 8 s)
const REQUEST_MS = 5000;

const cleanups = [];
let failed = false;

function lgBin() {
	if (process.env.LG_BIN)
		return path.resolve(ROOT, process.env.LG_BIN);
	for (const b of ['build/asan/lockgate', 'build/lockgate']) {
		const p = path.join(ROOT, b);
		if (fs.existsSync(p))
			return p;
	}
	throw new Error('no lockgate binary: run make build/lockgate build/asan/lockgate');
}

// Run FN on the way out (before the temp dirs are removed).
export function onCleanup(fn) {
	cleanups.unshift(fn);
}

export function tmpdir(tag) {
	const d = fs.mkdtempSync(path.join(os.tmpdir(), 'lg-browser-' + tag + '-'));
	cleanups.push(() => fs.rmSync(d, { recursive: true, force: true }));
	return d;
}

function freePort() {
	return new Promise((resolve, reject) => {
		const s = net.createServer();
		s.on('error', reject);
		s.listen(0, '127.0.0.1', () => {
			const { port } = s.address();
			s.close(() => resolve(port));
		});
	});
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// Start lockgate with ENV added to ours, on mem:// or, with STORE 'file',
// on file:// in its own directory (there a fencing token has 16 digits);
// resolves once /healthz answers.
export async function startLockgate(env = {}, args = [], store = 'mem') {
	const port = await freePort();
	const dir = tmpdir('lg');
	const logPath = path.join(dir, 'lockgate.log');
	const log = fs.openSync(logPath, 'w');
	const child = spawn(lgBin(), ['--listen', '127.0.0.1:' + port,
	    '--store', store === 'file' ? 'file://' + path.join(dir, 'store') : 'mem://',
	    ...args], {
		cwd: dir,
		env: {
			...process.env,
			ASAN_OPTIONS: 'detect_leaks=1:abort_on_error=0',
			UBSAN_OPTIONS: 'print_stacktrace=1:halt_on_error=1',
			...env,
		},
		stdio: ['ignore', log, log],
	});
	fs.closeSync(log);
	let exited = null;
	const done = new Promise((resolve) => child.on('exit', (code, sig) => {
		exited = { code, sig };
		resolve(exited);
	}));
	const lg = {
		url: 'http://127.0.0.1:' + port,
		pid: child.pid,
		logPath,
		log: () => fs.readFileSync(logPath, 'utf8'),
		async stop() {
			if (exited)
				return exited;
			process.kill(child.pid, 'SIGTERM');
			const r = await Promise.race([done, sleep(STOP_MS).then(() => null)]);
			if (!r) {
				process.kill(child.pid, 'SIGKILL');
				await done;
				throw new Error('lockgate ' + child.pid + ' ignored SIGTERM for ' + STOP_MS + ' ms');
			}
			const text = lg.log();
			if (/ERROR: (Address|Leak)Sanitizer|runtime error:/.test(text))
				throw new Error('sanitizer report in ' + logPath + ':\n' + text.slice(-3000));
			return r;
		},
	};
	cleanups.unshift(async () => {
		if (!exited) {
			try { process.kill(child.pid, 'SIGKILL'); } catch (e) { /* gone */ }
			await done;
		}
	});
	const t0 = Date.now();
	for (;;) {
		if (exited)
			throw new Error('lockgate exited at start (' + JSON.stringify(exited) + '):\n' + lg.log());
		try {
			const r = await fetch(lg.url + '/healthz', { signal: AbortSignal.timeout(1000) });
			if (r.ok)
				break;
		} catch (e) { /* not yet */ }
		if (Date.now() - t0 > START_MS)
			throw new Error('lockgate did not answer /healthz in ' + START_MS + ' ms:\n' + lg.log());
		await sleep(100);
	}
	return lg;
}

const b64url = (b) => Buffer.from(b).toString('base64url');

// An HS256 token for SUB, signed with SECRET, valid for an hour.
export function token(secret, sub, admin = false) {
	const now = Math.floor(Date.now() / 1000);
	const claims = { sub, iat: now, nbf: now - 5, exp: now + 3600 };
	if (admin)
		claims.admin = true;
	const head = b64url(JSON.stringify({ alg: 'HS256', typ: 'JWT' })) + '.' +
	    b64url(JSON.stringify(claims));
	const sig = crypto.createHmac('sha256', secret).update(head).digest('base64url');
	return head + '.' + sig;
}

// One API call; resolves to {status, headers, body (parsed JSON or null)}.
export async function call(lg, method, p, tok, body) {
	const headers = {};
	if (tok)
		headers.Authorization = 'Bearer ' + tok;
	if (body !== undefined)
		headers['Content-Type'] = 'application/json';
	const r = await fetch(lg.url + p, {
		method, headers,
		body: body === undefined ? undefined : JSON.stringify(body),
		signal: AbortSignal.timeout(REQUEST_MS),
	});
	const text = await r.text();
	let json = null;
	try { json = text ? JSON.parse(text) : null; } catch (e) { json = null; }
	return { status: r.status, headers: r.headers, body: json, text };
}

// Take lock NAME for TOK; throws unless granted.  Returns the lease.
export async function acquire(lg, tok, name, params) {
	const r = await call(lg, 'POST', '/v1/locks/' + name + ':acquire', tok, params);
	if (r.status !== 200 || !r.body || !r.body.lease_id)
		throw new Error('acquire ' + name + ': HTTP ' + r.status + ' ' + r.text);
	return r.body;
}

export async function release(lg, tok, name, leaseId) {
	const r = await call(lg, 'POST', '/v1/locks/' + name + ':release', tok, { lease_id: leaseId });
	if (r.status !== 204 && r.status !== 200)
		throw new Error('release ' + name + ': HTTP ' + r.status + ' ' + r.text);
}

// Chromium with a fresh profile, headless, nothing phoning home.
export async function browser(opts = {}) {
	const dir = tmpdir('profile');
	const ctx = await chromium.launchPersistentContext(dir, {
		executablePath: process.env.LG_CHROMIUM || '/usr/bin/chromium',
		headless: true,
		args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic',
		    '--no-first-run', '--disable-background-networking',
		    '--disable-component-update', '--disable-sync'],
		viewport: { width: 1280, height: 800 },
		...opts,
	});
	cleanups.unshift(() => ctx.close().catch(() => {}));
	return ctx;
}

// A page that records script errors, CSP violations and JS dialogs; any of
// them fails the test at check().
export async function watchedPage(ctx) {
	const page = await ctx.newPage();
	const problems = [];
	page.on('pageerror', (e) => problems.push('page error: ' + e.message));
	page.on('dialog', (d) => {
		problems.push('a JS dialog opened: ' + d.message());
		d.dismiss().catch(() => {});
	});
	page.on('console', (m) => {
		if (/Content.Security.Policy|Refused to/i.test(m.text()))
			problems.push('CSP: ' + m.text());
	});
	page.check = () => {
		if (problems.length)
			throw new Error(problems.join('\n'));
	};
	return page;
}

export function assert(cond, msg) {
	if (!cond)
		throw new Error(msg);
}

export function eq(got, want, msg) {
	if (got !== want)
		throw new Error(msg + ': got ' + JSON.stringify(got) + ', want ' + JSON.stringify(want));
}

// Poll FN (async, returns truthy when done) up to MS; returns elapsed ms.
export async function within(ms, fn, msg) {
	const t0 = Date.now();
	for (;;) {
		let v = false;
		try { v = await fn(); } catch (e) { v = false; }
		if (v)
			return Date.now() - t0;
		if (Date.now() - t0 > ms)
			throw new Error(msg + ' (not within ' + ms + ' ms)');
		await sleep(50);
	}
}

async function cleanup() {
	while (cleanups.length) {
		const f = cleanups.shift();
		try { await f(); } catch (e) { console.error('cleanup: ' + e.message); }
	}
}

// Run STEPS ([name, async fn]) in order; the first failure stops the rest.
export async function run(title, steps) {
	const dog = setTimeout(async () => {
		console.error('not ok - watchdog: ' + title + ' ran over ' + WATCHDOG_MS + ' ms');
		await cleanup();
		process.exit(1);
	}, WATCHDOG_MS);
	let n = 0;
	try {
		for (const [name, fn] of steps) {
			n++;
			const t0 = Date.now();
			try {
				await fn();
				console.log('ok ' + n + ' - ' + name + ' (' + (Date.now() - t0) + ' ms)');
			} catch (e) {
				failed = true;
				console.log('not ok ' + n + ' - ' + name);
				console.log(String(e && e.stack || e).split('\n').map((l) => '    ' + l).join('\n'));
				break;
			}
		}
	} finally {
		await cleanup();
		clearTimeout(dog);
	}
	console.log(failed ? 'FAILED ' + title : 'ok');
	process.exit(failed ? 1 : 0);
}
