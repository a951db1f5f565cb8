// lib.mjs: what the action's three programs share (main.mjs, post.mjs,
// heartbeat.mjs).  No npm dependencies: Node's own fetch, fs and crypto.
//
// The runner's protocol, as these programs use it:
//   inputs   INPUT_<NAME> (upper-cased, hyphens kept: INPUT_EXPECTED-DURATION)
//   outputs  "name=value" lines appended to the file $GITHUB_OUTPUT
//   state    "name=value" lines appended to $GITHUB_STATE; post reads STATE_name
//   logs     stdout; "::add-mask::V" hides V from every later log line,
//            "::error::M" and "::warning::M" annotate the run
// The bearer token never reaches a log line, an output, the state file, a
// command line or the heartbeat's environment: it is masked at once, and
// handed to the heartbeat on a pipe.
import crypto from 'node:crypto';
import fs from 'node:fs';

export const CALL_MS = 30000;      // one short call: refresh, release, token
export const POLL_MAX_S = 55;      // s of wait per acquire request
export const RETRIES = 5;          // attempts on 429, 5xx, transport errors
export const BACKOFF_MAX_MS = 10000;
export const STOP_MS = 5000;       // post: how long the heartbeat may take to stop

// A failure to report: its message is a sentence a person can act on, and
// never holds the token.
export class ActionError extends Error {}

export function input(name, dflt = '') {
	const v = process.env['INPUT_' + name.toUpperCase().replace(/ /g, '_')];
	return v === undefined || v.trim() === '' ? dflt : v.trim();
}

// A whole number of seconds in [min, max], or the default when empty.
export function inputInt(name, dflt, min, max) {
	const v = input(name, '');
	if (v === '')
		return dflt;
	if (!/^[0-9]{1,9}$/.test(v) || +v < min || +v > max)
		throw new ActionError(`input ${name} must be a whole number of seconds from ${min} to ${max}, not "${v}"`);
	return +v;
}

export function inputBool(name) {
	const v = input(name, 'false').toLowerCase();
	if (v !== 'true' && v !== 'false')
		throw new ActionError(`input ${name} must be true or false, not "${v}"`);
	return v === 'true';
}

// Workflow commands take a value on one line; escape as the runner expects.
function escapeData(s) {
	return String(s).replace(/%/g, '%25').replace(/\r/g, '%0D').replace(/\n/g, '%0A');
}

export function log(msg) {
	process.stdout.write(escapeData(msg) + '\n');
}
export function warning(msg) {
	process.stdout.write('::warning::' + escapeData(msg) + '\n');
}
export function error(msg) {
	process.stdout.write('::error::' + escapeData(msg) + '\n');
}
export function mask(secret) {
	if (secret)
		process.stdout.write('::add-mask::' + escapeData(secret) + '\n');
}

function appendKV(envName, key, value) {
	const file = process.env[envName];
	const v = String(value);
	if (/[\r\n]/.test(v))
		throw new ActionError(`${key}: a value with a line break cannot be saved`);
	if (!file) {
		// Outside a runner (a person trying it by hand): say it instead.
		log(`(${envName} unset) ${key}=${v}`);
		return;
	}
	fs.appendFileSync(file, `${key}=${v}\n`);
}
export const setOutput = (k, v) => appendKV('GITHUB_OUTPUT', k, v);
export const saveState = (k, v) => appendKV('GITHUB_STATE', k, v);
export const state = (k) => process.env['STATE_' + k] || '';

// Sleep MS, or less when SIGNAL aborts; leaves no listener behind (the
// heartbeat sleeps thousands of times on one signal).
export const sleep = (ms, signal) => new Promise((resolve) => {
	if (signal?.aborted)
		return resolve();
	const onAbort = () => { clearTimeout(t); resolve(); };
	const t = setTimeout(() => { signal?.removeEventListener('abort', onAbort); resolve(); }, ms);
	signal?.addEventListener('abort', onAbort, { once: true });
});

// Capped exponential backoff with full jitter, for attempt 0, 1, ...
export function backoffMs(attempt) {
	return Math.floor(Math.random() * Math.min(BACKOFF_MAX_MS, 500 * 2 ** attempt));
}

// A signal that aborts when PARENT does or after MS, whichever is first.
function deadline(ms, parent) {
	const ac = new AbortController();
	const t = setTimeout(() => ac.abort(), ms);
	const onAbort = () => ac.abort();
	parent?.addEventListener('abort', onAbort, { once: true });
	return {
		signal: ac.signal,
		done() {
			clearTimeout(t);
			parent?.removeEventListener('abort', onAbort);
		},
	};
}

export function baseUrl() {
	const u = input('url');
	if (!u)
		throw new ActionError('input url is required: the lockgate server, e.g. https://lock.example.com');
	let p;
	try {
		p = new URL(u);
	} catch (e) {
		throw new ActionError(`input url is not a URL: "${u}"`);
	}
	if (p.protocol !== 'https:' && p.protocol !== 'http:')
		throw new ActionError(`input url must be http or https: "${u}"`);
	return u.replace(/\/+$/, '');
}

export function lockName() {
	const n = input('name');
	if (!n)
		throw new ActionError('input name is required: the lock to take, e.g. prod/deploy');
	if (n.length > 256 || !/^[A-Za-z0-9][A-Za-z0-9._\/-]*$/.test(n))
		throw new ActionError(`input name "${n}" is not a lock name: 1-256 bytes of A-Z a-z 0-9 . _ - /, starting with a letter or digit`);
	return n;
}

// The token: the token input when given, else an OIDC token from the
// runner (permissions: id-token: write) for the audience input, which
// defaults to the url.  Masked before anything else can print it.
export async function getToken(url, signal) {
	const t = input('token');
	if (t) {
		mask(t);
		return { token: t, oidc: false };
	}
	return { token: await oidcToken(url, signal), oidc: true };
}

export async function oidcToken(url, signal) {
	const reqUrl = process.env.ACTIONS_ID_TOKEN_REQUEST_URL;
	const reqTok = process.env.ACTIONS_ID_TOKEN_REQUEST_TOKEN;
	if (!reqUrl || !reqTok)
		throw new ActionError('no token: set the token input (a secret), or give the job ' +
		    '"permissions: id-token: write" so that the action can ask GitHub for an OIDC token ' +
		    '(pull requests from forks get none)');
	const u = new URL(reqUrl);
	u.searchParams.set('audience', input('audience', url));
	for (let attempt = 0; ; attempt++) {
		const d = deadline(CALL_MS, signal);
		let res, body;
		try {
			res = await fetch(u, { headers: { Authorization: 'bearer ' + reqTok }, signal: d.signal });
			body = await res.text();
		} catch (e) {
			if (signal?.aborted)
				throw e;
			if (attempt + 1 >= RETRIES)
				throw new ActionError(`the runner's OIDC token endpoint did not answer: ${e.cause?.code || e.message}`);
			await sleep(backoffMs(attempt), signal);
			continue;
		} finally {
			d.done();
		}
		if ((res.status === 429 || res.status >= 500) && attempt + 1 < RETRIES) {
			await sleep(backoffMs(attempt), signal);
			continue;
		}
		let v;
		try {
			v = JSON.parse(body).value;
		} catch (e) { /* below */ }
		if (!res.ok || typeof v !== 'string' || !v)
			throw new ActionError(`the runner's OIDC token endpoint answered ${res.status} without a token`);
		mask(v);
		return v;
	}
}

// The answer to one lockgate call: { status, body (parsed JSON or null),
// code (error code or ''), message, retryAfter (s) }.  Transport errors
// throw; the caller decides whether to retry.
export async function call(method, url, token, signal, ms = CALL_MS) {
	const d = deadline(ms, signal);
	try {
		const res = await fetch(url, {
			method,
			headers: { Authorization: 'Bearer ' + token, Accept: 'application/json' },
			signal: d.signal,
		});
		const text = await res.text();
		let body = null;
		try {
			body = text ? JSON.parse(text) : null;
		} catch (e) { /* not lockgate's: reported below */ }
		const ra = parseInt(res.headers.get('retry-after') || '', 10);
		return {
			status: res.status,
			body,
			code: body?.error?.code || '',
			message: body?.error?.message || '',
			retryAfter: Number.isFinite(ra) && ra > 0 ? Math.min(ra, 60) : 0,
		};
	} finally {
		d.done();
	}
}

export function lockUrl(base, name, verb, params = {}) {
	const q = new URLSearchParams();
	for (const [k, v] of Object.entries(params))
		if (v !== '' && v !== undefined && v !== null)
			q.set(k, String(v));
	const qs = q.toString();
	// Names are [A-Za-z0-9._/-]: safe in a path as they are.
	return `${base}/v1/locks/${name}:${verb}` + (qs ? '?' + qs : '');
}

// "401 unauthorized: the message" for a person.
export function describe(r) {
	if (r.code)
		return `${r.status} ${r.code}: ${r.message}`;
	return `${r.status} (not a lockgate answer: is the url right?)`;
}

// A client idempotency key for one acquire: every poll of one wait sends
// the same, so a poll whose answer was lost is recognised as ours.  The
// lease_id this step uses is always the one the server answers with.
export function newKey() {
	return crypto.randomBytes(18).toString('base64url');
}

export function holderDefault() {
	const e = process.env;
	if (e.GITHUB_SERVER_URL && e.GITHUB_REPOSITORY && e.GITHUB_RUN_ID)
		return `${e.GITHUB_SERVER_URL}/${e.GITHUB_REPOSITORY}/actions/runs/${e.GITHUB_RUN_ID}` +
		    (e.GITHUB_JOB ? ` job ${e.GITHUB_JOB}` : '');
	return `pid ${process.pid}`;
}
