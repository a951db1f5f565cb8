// seed27.mjs: the on-call data set of issue 25, shared by the tests that
// need it: 27 locks, some overdue, some expiring, some expired, long
// purposes and labels, slashes in names.  Returns the leases by name.
import { acquire } from './harness.mjs';

export const LONG_PURPOSE = ('Roll out the payments service to every region, one region at a ' +
    'time, waiting for the error budget to settle between each; ').repeat(8).slice(0, 1000);

export async function seed27(lg, tok) {
	const out = {};
	const take = async (name, p) => { out[name] = await acquire(lg, tok, name, p); };
	const svcs = ['payments', 'search', 'billing'];
	for (const svc of svcs)
		for (const env of ['prod', 'staging'])
			await take(`${env}/${svc}/deploy`, { ttl: 900, holder: 'https://ci.example/' + svc + '/-/jobs/' + (8800 + Object.keys(out).length),
			    purpose: 'deploy ' + svc + ' 3.4.' + env.length, labels: { env, team: svc, tier: 'gold' } });
	// overdue: expected 1 s or 2 s
	await take('prod/db/migrate', { ttl: 600, holder: 'bob@laptop', purpose: 'schema 42', expected_duration: 1 });
	await take('prod/cache/flush', { ttl: 600, holder: 'cron@cache-1', purpose: 'flush', expected_duration: 2 });
	// expiring soon (ttl 8 s), expired awaiting takeover (ttl 2 s)
	await take('ops/backup/nightly', { ttl: 8, holder: 'cron@db-1', purpose: 'nightly backup', labels: { tier: 'gold' } });
	await take('tmp/short', { ttl: 2, holder: 'flaky-job', purpose: 'gone soon' });
	// long text
	await take('prod/payments/rollout', { ttl: 900, holder: 'https://ci.example/payments/-/pipelines/123456789/jobs/987654321/' + 'x'.repeat(200),
	    purpose: LONG_PURPOSE, labels: { change: 'CHG-20260112-0042', env: 'prod', region: 'europe-west1' } });
	await take('very-long-service-name-for-the-batch-pipeline/region-europe-west1/step/compaction-of-old-partitions',
	    { ttl: 900, holder: 'batch-7', purpose: 'compaction' });
	for (let i = 0; Object.keys(out).length < 27; i++)
		await take('ci/runner-' + String(i).padStart(2, '0'), { ttl: 600, holder: 'runner-' + i, purpose: 'build #' + (400 + i) });
	return out;
}
