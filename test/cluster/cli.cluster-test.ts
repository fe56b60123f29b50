import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Cluster } from 'ioredis';
import { FireOnceGuard, type Lease } from '../../src';
import { holderId } from '../../src/core';
import { appendEvent } from '../../src/cli/log';
import { startRedisCluster } from '../../sample-workflows/services';
import { runCli } from '../cli/run-cli';
import { documentedCliGrant } from '../security/acl-rules';
import { testPrefix } from '../support/redis';
import { makeCertificate } from '../support/tls';
import { connectCluster, deletePrefixOnCluster, keySlot, masters } from '../support/cluster/cluster';

/** A cluster for the test's own client, and the URL by which the CLI reaches one of its masters. */
interface ClusterUnderTest {
  readonly cluster: Cluster;
  readonly urlOf: (master: { host: string; port: number }) => string;
  readonly env: Record<string, string>;
  readonly stop: () => Promise<void>;
}

const transports: [string, () => Promise<ClusterUnderTest>][] = [
  ['redis://', async () => ({ cluster: connectCluster(), urlOf: ({ host, port }) => `redis://${host}:${port}`, env: {}, stop: async () => undefined })],
  [
    // A cluster of this file's own whose nodes also listen for TLS: the CLI, given one node's
    // rediss:// URL, must reach every other node over TLS too, the raw log reader included.
    'rediss:// (TLS to every node)',
    async () => {
      const dir = mkdtempSync(join(tmpdir(), 'fire-once-cluster-tls-'));
      const cert = makeCertificate(dir);
      const service = await startRedisCluster({ tls: { ...cert, caFile: cert.certFile } });
      const tlsPort = (port: number) => service.tlsNodes![service.nodes.findIndex((n) => n.port === port)].port;
      return {
        cluster: new Cluster([...service.nodes]),
        urlOf: ({ port }) => `rediss://localhost:${tlsPort(port)}`,
        env: { NODE_EXTRA_CA_CERTS: cert.certFile },
        stop: async () => {
          await service.stop();
          rmSync(dir, { recursive: true, force: true });
        },
      };
    },
  ],
];

// The `fire-once` CLI given the URL of one node of a Redis Cluster: it follows the cluster, so a
// scope whose keys live on another node is inspected, released and invalidated there, and the
// report reads the log from whichever node owns it. Every command is spawned as its own process.
describe.each(transports)('the fire-once CLI on a Redis Cluster over %s, given one node', (name, open) => {
  let under: ClusterUnderTest;
  let cluster: Cluster;
  let prefix: string;
  let guard: FireOnceGuard;
  let url: string;
  /** A scope whose slot another master than the URL's owns. */
  let scope: string;
  let lease: Lease;

  beforeAll(async () => {
    under = await open();
    cluster = under.cluster;
    prefix = testPrefix('ccli');
    guard = new FireOnceGuard({ redis: cluster, keyPrefix: prefix, lockTtlMs: 60_000 });
    const [first] = await masters(cluster);
    url = under.urlOf({ host: first.options.host!, port: first.options.port! });
    const slots = await cluster.cluster('SLOTS');
    const owner = (s: string) => slots.find(([from, to]) => keySlot(`{default/${s}}`) >= from && keySlot(`{default/${s}}`) <= to)?.[2][1];
    scope = Array.from({ length: 100 }, (_, i) => `session-${i}`).find((s) => owner(s) !== first.options.port) as string;
    const outcome = await guard.acquire({ scope, step: 'dispatch', jobType: 'summary', holder: 'wf-1 run-1 1' });
    if (outcome.kind !== 'acquired') throw new Error(`expected acquired, got ${outcome.kind}`);
    lease = outcome.lease;
  });
  afterAll(async () => {
    if (!under) return; // open() failed; its error is the one reported
    await deletePrefixOnCluster(cluster, prefix);
    await cluster.quit();
    await under.stop();
  });

  const cli = (...args: string[]) => runCli([...args, '--redis', url, '--prefix', prefix], under.env);

  it('report finds the scope dispatched twice, with its run IDs, and exits 1', async () => {
    // run-1's entry carries the held lock's holder hash, as the worker writes it.
    for (const runId of ['run-1', 'run-2']) {
      const holder = runId === 'run-1' ? { holder: holderId(lease.token) } : {};
      await appendEvent(cluster, guard.keys.log(), {
        decision: 'dispatched',
        scope,
        step: 'dispatch',
        jobType: 'summary',
        workflowId: `wf-${runId}`,
        runId,
        ...holder,
      });
    }
    const run = await cli('report', '--json');
    expect(run.stderr).toBe('');
    expect(run.code).toBe(1);
    const report = JSON.parse(run.stdout) as { events: number; duplicates: { scope: string; dispatches: { runId: string }[] }[] };
    expect(report.events).toBe(2);
    expect(report.duplicates).toHaveLength(1);
    expect(report.duplicates[0].scope).toBe(scope);
    expect(report.duplicates[0].dispatches.map((d) => d.runId)).toEqual(['run-1', 'run-2']);
  });

  it('refuses a URL that names a database other than 0 as a usage error (exit 2), not as Redis unreachable', async () => {
    for (const command of ['inspect', 'doctor']) {
      const run = await runCli([command, ...(command === 'inspect' ? [scope] : []), '--redis', `${url}/1`, '--prefix', prefix], under.env);
      expect(run.stderr).toMatch(/names database 1, but a Redis Cluster has database 0 only/);
      expect(run.code).toBe(2);
    }
  });

  it("as the CLI's user that docs/operating.md grants, with the Cluster commands, created on every node: inspect and report read across nodes", async () => {
    const user = `cli-${prefix}`;
    const nodes = cluster.nodes('all');
    for (const node of nodes)
      await node.call('ACL', 'SETUSER', user, 'reset', 'on', '>cli-pw', ...documentedCliGrant(prefix), '+cluster|slots', '+cluster|info');
    try {
      const as = new URL(url);
      as.username = user;
      as.password = 'cli-pw';
      const inspected = await runCli(['inspect', scope, '--json', '--redis', as.toString(), '--prefix', prefix], under.env);
      expect([inspected.code, inspected.stderr]).toEqual([0, '']);
      expect((JSON.parse(inspected.stdout) as { locks: { present: boolean }[] }).locks).toEqual([expect.objectContaining({ present: true })]);
      const reported = await runCli(['report', '--json', '--redis', as.toString(), '--prefix', prefix], under.env);
      expect([reported.code, reported.stderr]).toEqual([1, '']); // the duplicate of the report test above
    } finally {
      for (const node of nodes) await node.call('ACL', 'DELUSER', user);
    }
  });

  it('inspect shows the lock held on another node', async () => {
    const run = await cli('inspect', scope, '--json');
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    const view = JSON.parse(run.stdout) as { locks: { step: string; present: boolean; holder: string; fencingToken: number }[] };
    expect(view.locks).toEqual([expect.objectContaining({ step: 'dispatch', present: true, holder: 'wf-1 run-1 1', fencingToken: lease.fencingToken })]);
  });

  it('release --force deletes that lock on its node and records release-forced under its job type', async () => {
    const run = await cli('release', scope, '--step', 'dispatch', '--force', '--json');
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    expect(await cluster.exists(lease.lockKey)).toBe(0);
    const [[, fields]] = await cluster.xrevrange(guard.keys.log(), '+', '-', 'COUNT', 1);
    expect(fields).toEqual(expect.arrayContaining(['decision', 'release-forced', 'scope', scope, 'jobType', 'summary']));
  });

  it('invalidate --force deletes an artifact on another node', async () => {
    const outcome = await guard.acquire({ scope, step: 'dispatch', jobType: 'summary' });
    if (outcome.kind !== 'acquired') throw new Error(`expected acquired, got ${outcome.kind}`);
    await guard.commit(outcome.lease, Buffer.from('result'));
    const run = await cli('invalidate', scope, '--job-type', 'summary', '--force');
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    expect(await cluster.exists(outcome.lease.artifactKey)).toBe(0);
  });

  // Defined on the cluster of this file's own only: on the shared one, other files' CLI runs load
  // the same script on other masters, and SCRIPT FLUSH theirs.
  if (name.startsWith('rediss://'))
    it("invalidate reads the clock it orders dispatches by on the scope's own master", async () => {
      // `fire-once report` compares the invalidation's `redisTime` with fencing tokens, which the
      // scope's master stamps; the clock is read in a one-line script on the artifact's key, which
      // this shows by the script cache of each master (the URL's master is not the scope's).
      const clock = createHash('sha1').update("return redis.call('TIME')").digest('hex');
      const loaded = async () => {
        const byPort = new Map<number, number>();
        for (const node of await masters(cluster)) byPort.set(node.options.port!, ((await node.script('EXISTS', clock)) as number[])[0]);
        return byPort;
      };
      for (const node of await masters(cluster)) await node.script('FLUSH');
      const outcome = await guard.acquire({ scope, step: 'dispatch', jobType: 'summary' });
      if (outcome.kind !== 'acquired') throw new Error(`expected acquired, got ${outcome.kind}`);
      await guard.commit(outcome.lease, Buffer.from('result'));
      const run = await cli('invalidate', scope, '--job-type', 'summary', '--force');
      expect(run.code).toBe(0);
      const slots = await cluster.cluster('SLOTS');
      const slot = keySlot(outcome.lease.artifactKey);
      const scopesMaster = slots.find(([from, to]) => slot >= from && slot <= to)![2][1];
      const byPort = await loaded();
      expect([...byPort].filter(([, exists]) => exists === 1).map(([port]) => port)).toEqual([scopesMaster]);
    });
});
