// heartbeat.mjs DIR: keeps one lease alive between the action's main and
// post steps.  Started detached by main.mjs; reads its configuration (with
// the token) as JSON on stdin, so the token is in no argument and no
// environment variable.  Refreshes every refresh_interval (the server's
// answer), and keeps DIR/status.json up to date for post:
//   {"state": "running"|"lost"|"stopped", "pid", "refreshes",
//    "expires_at", "message"}
// "lost" is final: the server said the lease is gone (409 lease_lost,
// 404 lease_not_found, 403), or no refresh got through for a whole ttl.
// Stops on SIGTERM (post) or SIGINT; the runner kills it at the end of
// the job in any case.
import fs from 'node:fs';
import path from 'node:path';
import { backoffMs, call, describe, lockUrl, oidcToken, sleep } from './lib.mjs';

const dir = process.argv[2];
const statusPath = path.join(dir, 'status.json');
const stop = new AbortController();
let status = { state: 'running', pid: process.pid, refreshes: 0, expires_at: '', message: '' };

function save(patch) {
	status = { ...status, ...patch };
	const tmp = statusPath + '.tmp';
	fs.writeFileSync(tmp, JSON.stringify(status));
	fs.renameSync(tmp, statusPath);
}

function stamp(msg) {
	process.stdout.write(new Date().toISOString() + ' ' + msg + '\n');
}

for (const sig of ['SIGTERM', 'SIGINT'])
	process.on(sig, () => stop.abort());

async function readConfig() {
	let text = '';
	for await (const chunk of process.stdin)
		text += chunk;
	try {
		return JSON.parse(text);
	} catch (e) {
		// Not e.message: it may quote the input, and the input holds the token.
		throw new Error('unreadable configuration on stdin');
	}
}

async function main() {
	const cfg = await readConfig();
	const url = lockUrl(cfg.url, cfg.name, 'refresh', { lease_id: cfg.lease_id });
	let interval = cfg.interval, lastOk = Date.now(), failures = 0, reauth = false;
	save({});
	stamp(`refreshing ${cfg.name} every ${interval} s`);
	let next = interval * 1000;
	while (!stop.signal.aborted) {
		await sleep(next, stop.signal);
		if (stop.signal.aborted)
			break;
		let r = null;
		try {
			r = await call('POST', url, cfg.token, stop.signal, Math.max(1000, cfg.ttl * 1000 / 2));
		} catch (e) {
			if (stop.signal.aborted)
				break;
			stamp(`refresh failed: ${e.cause?.code || e.name}`);
		}
		if (r && r.status === 200) {
			lastOk = Date.now();
			failures = 0;
			reauth = false;
			interval = r.body?.refresh_interval || interval;
			next = interval * 1000;
			save({ refreshes: status.refreshes + 1, expires_at: r.body?.expires_at || '' });
			continue;
		}
		if (r && (r.code === 'lease_lost' || r.code === 'lease_not_found' || r.status === 403)) {
			save({ state: 'lost', message: describe(r) });
			stamp('lease lost: ' + describe(r));
			return;
		}
		if (r && r.status === 401 && cfg.oidc && !reauth) {
			reauth = true;      // an OIDC token outlived: ask the runner again
			try {
				cfg.token = await oidcToken(cfg.url, stop.signal);
				next = 0;
				continue;
			} catch (e) {
				stamp('could not renew the OIDC token');
			}
		}
		if (r)
			stamp('refresh failed: ' + describe(r));
		if (Date.now() - lastOk > cfg.ttl * 1000) {
			save({ state: 'lost', message: `no refresh got through for ${Math.round((Date.now() - lastOk) / 1000)} s, longer than the ttl of ${cfg.ttl} s: the lease expired` });
			stamp('lease expired unrefreshed');
			return;
		}
		next = Math.min(interval * 1000, Math.max(r?.retryAfter * 1000 || 0, backoffMs(failures++)));
	}
	save({ state: 'stopped' });
	stamp('stopped');
}

main().catch((e) => {
	try {
		save({ state: 'lost', message: 'the heartbeat failed: ' + (e?.message || e) });
	} catch (e2) { /* nothing left to tell */ }
	stamp('failed: ' + (e?.stack || e));
	process.exitCode = 1;
});
