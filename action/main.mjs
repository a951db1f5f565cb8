// main.mjs: the action's main step.  Acquires the lock (waiting as asked),
// saves the lease for post before anything else, sets the outputs and
// starts the detached heartbeat.  With the release input it releases that
// lease instead and leaves nothing for post.
//
// Cancelled (SIGINT or SIGTERM from the runner) while waiting: the request
// is aborted and nothing is saved, so post releases nothing.  A grant that
// races the cancel and never reached us, or one of an attempt that got no
// answer or a 5xx before the step gave up, is looked for with the step's
// key and given back (abandon).  Cancelled after the grant: the lease is
// already in the state file, and post releases it.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import {
	ActionError, POLL_MAX_S, RETRIES, backoffMs, baseUrl, call, describe, error,
	getToken, holderDefault, input, inputBool, inputInt, lockName, lockUrl, log,
	newKey, oidcToken, saveState, setOutput, sleep,
} from './lib.mjs';

const HEARTBEAT_START_MS = 5000;
const WAIT_MAX_S = 6 * 3600;       // a GitHub-hosted job's own limit

const cancel = new AbortController();
let signalled = '';
for (const sig of ['SIGINT', 'SIGTERM']) {
	process.on(sig, () => {
		if (signalled)
			process.exit(1);
		signalled = sig;
		cancel.abort();
	});
}

class Cancelled extends Error {}
let granted = false;

function holderOf(r) {
	const l = r.body?.error?.lock || {};
	const who = [l.holder, l.owner && `owner ${l.owner}`].filter(Boolean).join(', ');
	return (who || 'another job') + (l.expires_at ? `, until ${l.expires_at} unless refreshed` : '');
}

// The server names its longest wait per request in a 400; use it.
function serverMaxWait(r) {
	const m = /parameter 'wait' must be (?:from|a whole number from) 0 to ([0-9]+)/.exec(r.message);
	return m ? +m[1] : -1;
}

// What an attempt of unknown outcome may have left (the server may have
// granted it after we stopped listening): our KEY finds that lease (an
// acquire with it returns our live lease, renewed), and it is released.
// One short try each, on no signal (a cancel may have ended ours): the
// TTL frees the lock if they fail.
async function abandon(base, name, params, key, tok) {
	try {
		const r = await call('POST', lockUrl(base, name, 'acquire',
		    { ...params, ttl: 2, wait: 0, lease_id: key }), tok.token, undefined, 5000);
		if (r.status === 200 && typeof r.body?.lease_id === 'string' && r.body.lease_id)
			await call('POST', lockUrl(base, name, 'release', { lease_id: r.body.lease_id }),
			    tok.token, undefined, 5000);
	} catch (e) { /* its TTL frees the lock */ }
}

// Acquire NAME, waiting up to WAIT s in requests of at most POLL_MAX_S
// (or the server's maximum).  The first request does not wait, so the log
// names the holder at once.  Returns the lease the server answered with;
// gives back what an attempt may have left before it throws (abandon).
async function acquire(base, name, params, wait, tok) {
	const key = newKey();
	// An attempt got no answer or a 5xx, or a cancel cut one short.
	const state = { unsure: false };
	try {
		return await acquireLoop(base, name, params, wait, tok, key, state);
	} catch (e) {
		if (state.unsure || e instanceof Cancelled || e?.name === 'AbortError')
			await abandon(base, name, params, key, tok);
		throw e;
	}
}

async function acquireLoop(base, name, params, wait, tok, key, state) {
	const end = Date.now() + wait * 1000;
	let pollMax = POLL_MAX_S, waiting = false, failures = 0, reauth = false;
	for (;;) {
		const left = Math.max(0, Math.ceil((end - Date.now()) / 1000));
		const w = waiting ? Math.min(left, pollMax) : 0;
		let r;
		try {
			r = await call('POST', lockUrl(base, name, 'acquire', { ...params, wait: w, lease_id: key }),
			    tok.token, cancel.signal, (w + 30) * 1000);
		} catch (e) {
			if (cancel.signal.aborted)
				throw new Cancelled();
			state.unsure = true;
			if (++failures >= RETRIES && !(waiting && Date.now() < end))
				throw new ActionError(`lockgate at ${base} did not answer (${e.cause?.code || e.name}), ${failures} times`);
			await sleep(backoffMs(failures), cancel.signal);
			continue;
		}
		if (r.status === 200 && typeof r.body?.lease_id === 'string' && r.body.lease_id)
			return r.body;
		if (r.status === 409 && r.code === 'locked') {
			if (wait === 0)
				throw new ActionError(`${name} is held by ${holderOf(r)}; not waiting (input wait is 0)`);
			if (!waiting)
				log(`lockgate: ${name} is held by ${holderOf(r)}; waiting up to ${wait} s`);
			else if (left === 0)
				throw new ActionError(`${name} is still held by ${holderOf(r)} after waiting ${wait} s (input wait)`);
			waiting = true;
			failures = 0;
			continue;
		}
		if (r.status === 400 && serverMaxWait(r) >= 0 && w > serverMaxWait(r)) {
			pollMax = serverMaxWait(r);
			continue;
		}
		if (r.status === 401 && tok.oidc && !reauth) {
			reauth = true;        // the token may have expired while we waited
			tok.token = await oidcToken(base, cancel.signal);
			continue;
		}
		if (r.status >= 500)
			state.unsure = true;
		// Busy or unavailable: retried RETRIES times, or while there is
		// time left to wait.
		if ((r.status === 429 || r.status >= 500) &&
		    (++failures < RETRIES || (waiting && Date.now() < end))) {
			await sleep(r.retryAfter ? r.retryAfter * 1000 : backoffMs(failures), cancel.signal);
			if (cancel.signal.aborted)
				throw new Cancelled();
			continue;
		}
		if (r.status === 409 && r.code === 'limit_mismatch')
			throw new ActionError(`could not acquire ${name}: its holders use another limit or mode than the inputs limit and shared ask for (${describe(r)})`);
		throw new ActionError(`could not acquire ${name}: ${describe(r)}`);
	}
}

// Start heartbeat.mjs detached, its stdio away from the step's (the
// runner waits for the step's pipes to close), the token on its stdin.
// Resolves with its pid once it reports itself running.
async function startHeartbeat(cfg) {
	const dir = fs.mkdtempSync(path.join(process.env.RUNNER_TEMP || os.tmpdir(), 'lockgate-'));
	const logFd = fs.openSync(path.join(dir, 'heartbeat.log'), 'a');
	const env = { ...process.env };
	delete env.INPUT_TOKEN;
	const script = path.join(path.dirname(fileURLToPath(import.meta.url)), 'heartbeat.mjs');
	const child = spawn(process.execPath, [script, dir], {
		detached: true,
		windowsHide: true,
		stdio: ['pipe', logFd, logFd],
		env,
	});
	fs.closeSync(logFd);
	child.on('error', () => {});
	saveState('hb_pid', child.pid);    // post stops it, whatever happens next
	saveState('hb_dir', dir);
	await new Promise((resolve) => child.stdin.end(JSON.stringify(cfg), resolve));
	child.unref();
	const t0 = Date.now();
	while (Date.now() - t0 < HEARTBEAT_START_MS) {
		try {
			const st = JSON.parse(fs.readFileSync(path.join(dir, 'status.json'), 'utf8'));
			if (st.pid === child.pid)
				return { pid: child.pid, dir };
		} catch (e) { /* not yet */ }
		if (child.exitCode !== null)
			break;
		await sleep(50);
	}
	throw new ActionError(`the heartbeat did not start (see ${dir}/heartbeat.log): the lease would expire after its ttl`);
}

async function releaseMode(id) {
	saveState('mode', 'release');   // post: nothing of ours to release
	const base = baseUrl(), name = lockName();
	const tok = await getToken(base, cancel.signal);
	for (let attempt = 0; ; attempt++) {
		let r;
		try {
			r = await call('POST', lockUrl(base, name, 'release', { lease_id: id }), tok.token, cancel.signal);
		} catch (e) {
			if (cancel.signal.aborted || attempt + 1 >= RETRIES)
				throw new ActionError(`lockgate at ${base} did not answer the release of ${name}`);
			await sleep(backoffMs(attempt), cancel.signal);
			continue;
		}
		if (r.status === 204 || (r.status >= 200 && r.status < 300)) {
			log(`lockgate: released ${name} (lease given as input release)`);
			return;
		}
		if ((r.status === 429 || r.status >= 500) && attempt + 1 < RETRIES) {
			await sleep(r.retryAfter ? r.retryAfter * 1000 : backoffMs(attempt), cancel.signal);
			continue;
		}
		if (r.code === 'lease_not_found' || r.code === 'lease_lost')
			throw new ActionError(`could not release ${name}: that lease is gone (${describe(r)}); it expired or was force-released, and another job may have held ${name} since`);
		throw new ActionError(`could not release ${name}: ${describe(r)}`);
	}
}

// The limit and shared inputs as acquire parameters, sent on every
// attempt (none for the default exclusive lock, as before).
function kindParams() {
	const v = input('limit', '1');
	if (!/^[0-9]{1,4}$/.test(v) || +v < 1 || +v > 1000)
		throw new ActionError(`input limit must be a whole number from 1 to 1000, not "${v}"`);
	const shared = inputBool('shared');
	if (shared && +v > 1)
		throw new ActionError(`inputs shared and limit ${v}: a shared lock has no limit; give one of them`);
	if (shared)
		return { mode: 'shared' };
	return +v > 1 ? { limit: +v } : {};
}

async function main() {
	const rel = input('release');
	if (rel)
		return releaseMode(rel);
	const base = baseUrl(), name = lockName();
	const ttl = inputInt('ttl', 120, 2, 86400);
	const wait = inputInt('wait', 0, 0, WAIT_MAX_S);
	const expected = inputInt('expected-duration', 0, 0, 10 * 86400);
	const keep = inputBool('keep');
	const params = {
		ttl,
		holder: input('holder', holderDefault()),
		purpose: input('purpose'),
		expected_duration: expected || '',
		...kindParams(),
	};
	const tok = await getToken(base, cancel.signal);
	const lease = await acquire(base, name, params, wait, tok);
	granted = true;
	// Saved first: from here on, a cancel leaves post a lease to release.
	saveState('name', name);
	saveState('lease_id', lease.lease_id);
	saveState('keep', keep);
	setOutput('lease-id', lease.lease_id);
	setOutput('fencing-token', lease.fencing_token);
	setOutput('expires-at', lease.expires_at);
	log(`lockgate: acquired ${name}, fencing token ${lease.fencing_token}, expires at ${lease.expires_at} ` +
	    `unless refreshed (every ${lease.refresh_interval} s until the post step)`);
	const hb = await startHeartbeat({
		url: base, name, lease_id: lease.lease_id, ttl: lease.ttl || ttl,
		interval: lease.refresh_interval || Math.max(1, Math.floor(ttl / 8)),
		token: tok.token, oidc: tok.oidc,
	});
	log(`lockgate: heartbeat ${hb.pid} keeps the lease; its log is ${hb.dir}/heartbeat.log`);
	if (signalled)
		throw new Cancelled();
}

main().then(() => process.exit(0), (e) => {
	if (e instanceof Cancelled || (signalled && e?.name === 'AbortError')) {
		log(`lockgate: cancelled (${signalled}) ` + (granted ?
		    'after the lock was granted: post releases it' :
		    'before the lock was granted: nothing was taken, post releases nothing'));
		process.exit(1);
	}
	error(e instanceof ActionError ? e.message : `lockgate action failed: ${e?.stack || e}`);
	process.exit(1);
});
