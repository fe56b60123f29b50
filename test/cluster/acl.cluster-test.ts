import { randomUUID } from 'node:crypto';
import type { Worker } from '@temporalio/worker';
import { Cluster } from 'ioredis';
import { FireOnceGuard, FireOncePlugin } from '../../src';
import type { DoctorReport } from '../../src/cli/doctor/doctor';
import { runCli } from '../cli/run-cli';
import { migrateSlot, startReplicatedCluster, targetOn, type NodeAddress, type ReplicatedCluster } from '../support/cluster/replicated';
import { ACL_USER, aclRules, clusterGrants, parseAclLog } from '../security/acl-rules';

/** Who sends the renewal mid-migration: ioredis, following the ASK, or the guard (replica sync). */
type Renewer = 'ioredis' | 'guard';

interface Report {
  readonly renewed: unknown[];
  readonly committed: unknown;
  readonly next: unknown;
  readonly dispatches: number;
}

/** What redis-py needs and ioredis does not: pinned by python/tests/test_cluster_acl.py instead. */
const PYTHON_ONLY = new Set(['command']);

// The least-privilege worker user of docs/reliability.md on a Redis Cluster (its two lines, read
// from the file): a worker connects, starts and guards, and keeps guarding while a slot migrates
// (ASK, then ASKING on the importing node), by ioredis's redirects and by the guard's own (replica
// sync); every command of the Cluster line is needed; and doctor asks for them on a Cluster node.
describe('the least-privilege ACL user on a Redis Cluster', () => {
  let nodes: ReplicatedCluster;
  let all: NodeAddress[];
  const password = 'acl-cluster-password';

  beforeAll(async () => {
    nodes = await startReplicatedCluster();
    all = [...nodes.masters, nodes.replica];
  }, 60_000);
  afterAll(() => nodes?.stop());

  /** The documented user on every node (ACL rules are per node), with `grants` added; ACL LOG emptied. */
  async function grant(prefix: string, grants: readonly string[]): Promise<void> {
    for (const address of all) {
      const node = nodes.node(address);
      await node.call('ACL', 'SETUSER', ACL_USER, ...aclRules(prefix, password), '+wait', ...grants.map((g) => `+${g}`));
      await node.call('ACL', 'LOG', 'RESET');
    }
  }

  /**
   * What the user was refused, on any node, but the two commands ioredis sends on connecting and
   * whose refusal it ignores: CLIENT SETNAME, and READONLY to a replica it reads the slot map from.
   */
  async function denied(): Promise<string[]> {
    const objects = new Set(await deniedAll());
    objects.delete('client|setname');
    objects.delete('readonly');
    return [...objects].sort();
  }

  /** Everything the user was refused, on any node. */
  async function deniedAll(): Promise<string[]> {
    const objects = new Set<string>();
    for (const address of all) {
      for (const d of parseAclLog(await nodes.node(address).call('ACL', 'LOG'))) if (d.username === ACL_USER) objects.add(d.object);
    }
    return [...objects].sort();
  }

  /**
   * A worker's life as the user: the plugin's start checks, an acquire, two renewals sent while
   * the scope's slot migrates from the second master to the first (with the replica), one by
   * ioredis's own ASK handling and one by the guard's (replica sync), then a commit once the slot
   * has moved, and a second invocation that fast-forwards. Dispatches are counted here.
   */
  async function scenario(prefix: string, renewers: readonly Renewer[] = ['ioredis', 'guard']): Promise<Report> {
    const cluster = new Cluster([...nodes.masters], { redisOptions: { username: ACL_USER, password }, clusterRetryStrategy: () => null });
    cluster.on('error', () => undefined);
    const admin = new Cluster([...nodes.masters]);
    try {
      await new FireOncePlugin({ redis: cluster, keyPrefix: prefix }).runWorker({} as Worker, async () => undefined);
      const guard = new FireOnceGuard({ redis: cluster, keyPrefix: prefix, replicaSync: false, storeTimeoutMs: 3_000 });
      const synced = new FireOnceGuard({ redis: cluster, keyPrefix: prefix, replicaSync: { replicas: 1, timeoutMs: 1_000 }, storeTimeoutMs: 3_000 });
      const { target, slot } = await targetOn(admin, guard, nodes.masters[1]);
      let dispatches = 0;
      const outcome = await guard.acquire(target);
      if (outcome.kind !== 'acquired') throw new Error(`expected to acquire, got ${outcome.kind}`);
      dispatches++;
      const { lease } = outcome;
      await admin.rpush(lease.waitersKey, 'a parked waiter'); // both keys exist, so both move
      await migrateSlot(nodes, slot, nodes.masters[1], nodes.masters[0], [lease.lockKey, lease.waitersKey]);
      const renewed: unknown[] = [];
      try {
        for (const by of renewers) renewed.push(await (by === 'ioredis' ? guard : synced).extend(lease, 60_000).catch((err: Error) => err.message));
      } finally {
        await migrateSlot(nodes, slot, nodes.masters[1], nodes.masters[0]);
      }
      const committed = await guard.commit(lease, Buffer.from('result')).then(
        ({ ours, stored }) => ({ ours, stored }),
        (err: Error) => err.message,
      );
      const again = await guard.acquire(target).catch((err: Error) => err);
      if (!(again instanceof Error) && again.kind === 'acquired') dispatches++;
      const next = again instanceof Error ? again.message : again.kind;
      return { renewed, committed, next, dispatches };
    } finally {
      cluster.disconnect();
      admin.disconnect();
    }
  }

  it('a worker as the documented user with the Cluster line starts, guards, and keeps guarding while a slot migrates, with no denial', async () => {
    const prefix = `acl-c-${randomUUID().slice(0, 8)}`;
    await grant(prefix, clusterGrants());
    expect(await scenario(prefix)).toEqual({
      renewed: [true, true],
      committed: { ours: true, stored: true },
      next: 'fast-forward',
      dispatches: 1,
    });
    expect(await denied()).toEqual([]);
  });

  // ioredis reads the slot map from any node it knows, replicas included, and sends READONLY to a
  // replica it connects to. The line does not grant it: the refusal is ignored, and the guard
  // never reads from a replica. Given only the replica's address, that READONLY is certain.
  it('a worker given only a replica: ioredis is refused READONLY there, ignores it, and the worker guards (1 dispatch)', async () => {
    const prefix = `acl-c-${randomUUID().slice(0, 8)}`;
    await grant(prefix, clusterGrants());
    const cluster = new Cluster([nodes.replica], { redisOptions: { username: ACL_USER, password }, clusterRetryStrategy: () => null });
    cluster.on('error', () => undefined);
    try {
      await new FireOncePlugin({ redis: cluster, keyPrefix: prefix }).runWorker({} as Worker, async () => undefined);
      const guard = new FireOnceGuard({ redis: cluster, keyPrefix: prefix, replicaSync: false });
      const target = { scope: 'replica-only', step: 'report', jobType: 'report' };
      let dispatches = 0;
      const first = await guard.acquire(target);
      if (first.kind === 'acquired') {
        dispatches++;
        expect(await guard.commit(first.lease, Buffer.from('result'))).toMatchObject({ ours: true, stored: true });
      }
      const again = await guard.acquire(target);
      if (again.kind === 'acquired') dispatches++;
      expect({ dispatches, again: again.kind }).toEqual({ dispatches: 1, again: 'fast-forward' });
    } finally {
      cluster.disconnect();
    }
    expect(await deniedAll()).toEqual(expect.arrayContaining(['readonly']));
    expect(await denied()).toEqual([]);
  });

  it.each(clusterGrants().filter((g) => !PYTHON_ONLY.has(g)))(
    'every command of the Cluster line is needed: without +%s the worker is denied it',
    async (command) => {
      const prefix = `acl-c-${randomUUID().slice(0, 8)}`;
      await grant(
        prefix,
        clusterGrants().filter((g) => g !== command),
      );
      // Without +asking, ioredis's own ASKING is refused too: the guard handles that refusal,
      // which ioredis leaves unhandled (reliability.md, 159).
      await scenario(prefix).catch(() => undefined);
      expect(await denied()).toContain(command);
    },
  );

  it('doctor, on a Cluster node, fails acl-worker for the user without the Cluster line, naming it; with it, ok', async () => {
    const prefix = `acl-c-${randomUUID().slice(0, 8)}`;
    const [first] = nodes.masters;
    const doctor = async () => {
      const run = await runCli(['doctor', '--redis', `redis://${first.host}:${first.port}`, '--prefix', prefix, '--acl-user', ACL_USER, '--json']);
      return (JSON.parse(run.stdout) as DoctorReport).verdicts.filter((v) => v.check === 'acl-worker');
    };
    await grant(prefix, []);
    const without = await doctor();
    expect(without).toHaveLength(3); // one per master
    for (const verdict of without) {
      expect(verdict).toMatchObject({
        status: 'fail',
        message: expect.stringContaining(
          `may not run ${clusterGrants()
            .map((g) => `+${g}`)
            .join(' ')} on ${prefix}:*`,
        ),
        fix: `ACL SETUSER ${ACL_USER} ${clusterGrants()
          .map((g) => `+${g}`)
          .join(' ')} (keys ~${prefix}:*, channels &${prefix}:*)`,
      });
      expect(verdict.message).toContain('a Redis Cluster');
    }
    await grant(prefix, clusterGrants());
    expect((await doctor()).map((v) => v.status)).toEqual(['ok', 'ok', 'ok']);
  });
});
