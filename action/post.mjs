// post.mjs: the action's post step (the runner runs it always: after
// success, failure and cancellation, for any step whose main ran).
// Stops the heartbeat, then releases the lease this step's main took and
// saved in the state, and nothing else: a main cancelled or failed while
// waiting saved no lease, and a release-mode main saved none either.
// Fails the job with a clear message when the lease was lost while the job
// ran (the heartbeat recorded it) or when the release finds it gone.
import fs from 'node:fs';
import path from 'node:path';
import {
	ActionError, RETRIES, STOP_MS, backoffMs, baseUrl, call, describe, error,
	getToken, log, lockUrl, sleep, state, warning,
} from './lib.mjs';

function readStatus(dir) {
	try {
		return JSON.parse(fs.readFileSync(path.join(dir, 'status.json'), 'utf8'));
	} catch (e) {
		return null;
	}
}

function alive(pid) {
	try {
		process.kill(pid, 0);
		return true;
	} catch (e) {
		return e.code === 'EPERM';
	}
}

// SIGTERM to the heartbeat main started, and wait (bounded) until it has
// stopped, so no refresh can follow the release.  Returns its last status.
async function stopHeartbeat() {
	const pid = parseInt(state('hb_pid'), 10), dir = state('hb_dir');
	if (!pid || !dir)
		return null;
	let st = readStatus(dir);
	// Only a process that reported itself as this heartbeat (a pid may be
	// reused once it exited).
	if (st?.pid === pid && st.state === 'running' && alive(pid)) {
		try {
			process.kill(pid, 'SIGTERM');
		} catch (e) { /* gone meanwhile */ }
		const t0 = Date.now();
		while (alive(pid) && Date.now() - t0 < STOP_MS)
			await sleep(50);
		if (alive(pid)) {
			try {
				process.kill(pid, 'SIGKILL');
			} catch (e) { /* gone */ }
		}
		st = readStatus(dir);
	}
	return st;
}

async function release(base, name, id) {
	const tok = await getToken(base);
	for (let attempt = 0; ; attempt++) {
		let r;
		try {
			r = await call('POST', lockUrl(base, name, 'release', { lease_id: id }), tok.token);
		} catch (e) {
			if (attempt + 1 >= RETRIES)
				throw new ActionError(`lockgate at ${base} did not answer the release of ${name} ` +
				    `(${e.cause?.code || e.name}): the lock stays held until its ttl runs out`);
			await sleep(backoffMs(attempt));
			continue;
		}
		if (r.status >= 200 && r.status < 300)
			return;
		if ((r.status === 429 || r.status >= 500) && attempt + 1 < RETRIES) {
			await sleep(r.retryAfter ? r.retryAfter * 1000 : backoffMs(attempt));
			continue;
		}
		if (r.code === 'lease_not_found' || r.code === 'lease_lost')
			throw new ActionError(`the lease on ${name} was lost before the job ended (${describe(r)}): ` +
			    `it was force-released or expired, and another job may have held ${name} while this one worked`);
		throw new ActionError(`could not release ${name}: ${describe(r)}`);
	}
}

async function main() {
	const id = state('lease_id'), name = state('name');
	if (!id) {
		log('lockgate: this step took no lease (it released one, or was cancelled or failed before ' +
		    'the lock was granted): nothing to release');
		return;
	}
	const st = await stopHeartbeat();
	if (st?.state === 'lost') {
		// Best effort: a lease that expired unrefreshed and that nobody
		// took since can still be released, and frees the lock now.
		await release(baseUrl(), name, id).catch(() => {});
		throw new ActionError(`the lease on ${name} was lost while the job ran (${st.message}): ` +
		    `another job may have held ${name} at the same time; this run's work was not protected by the lock`);
	}
	if (!st)
		warning('lockgate: the heartbeat left no status; releasing anyway');
	if (state('keep') === 'true') {
		log(`lockgate: keeping ${name} held (input keep); release it in a later job with the release input set to this step's ` +
		    `lease-id output, before its ttl runs out: nothing refreshes it after this job`);
		return;
	}
	await release(baseUrl(), name, id);
	log(`lockgate: released ${name}` + (st ? ` after ${st.refreshes} refreshes` : ''));
}

main().then(() => process.exit(0), (e) => {
	error(e instanceof ActionError ? e.message : `lockgate action post failed: ${e?.stack || e}`);
	process.exit(1);
});
