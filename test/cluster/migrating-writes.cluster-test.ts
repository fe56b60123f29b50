import { Cluster } from 'ioredis';
import { FireOnceGuard, FireOnceStoreUnavailable, type DispatchTarget, type FireOnceGuardOptions, type Lease } from '../../src';
import { clientOf, detourReplies, errorReplies, migrateSlot, targetOn, type NodeAddress, useReplicatedCluster } from '../support/cluster/replicated';
import { testPrefix } from '../support/redis';
import { REPLICATION_PACE, waitFor } from '../support/wait';

// The guard's writes while their slot stays migrating for longer than the client follows it: a
// migration of a slot with many keys, or a slow `redis-cli --cluster reshard`. Mid-migration a
// script whose keys are split between the two masters, or missing where it was asked, is answered
// TRYAGAIN, and one whose keys all moved ASK; ioredis follows at most `maxRedirections` (16) such
// replies for one command, then rejects it. A commit that gives up so loses the job's result, and
// once the lock is gone the next invocation dispatches the job again. Spawned here: three masters,
// the first with a replica, and a spare master with no slot, which no client knows yet.
describe('writes whose slot stays migrating', () => {
  let cluster: Cluster;
  let first: NodeAddress;
  let second: NodeAddress;
  let dispatches: number;

  const spawned = useReplicatedCluster({ spare: true });
  let nodes: ReturnType<typeof spawned>;
  beforeEach(async () => {
    nodes = spawned();
    [first, second] = nodes.masters;
    cluster = await clientOf(nodes); // the slot map, read before the first guard call
    dispatches = 0;
  });
  afterEach(() => cluster.quit());

  // Locks outlive every wait of these tests: a lock left behind must not pass by expiring.
  const guardOf = (options: Partial<FireOnceGuardOptions> = {}) =>
    new FireOnceGuard({
      redis: options.redis ?? cluster,
      keyPrefix: testPrefix('cmw'),
      lockTtlMs: 600_000,
      storeTimeoutMs: 10_000,
      replicaSync: false,
      ...options,
    });

  /** An acquire that took its lock counts as a dispatch: the count is the test's, not the guard's. */
  async function lease(guard: FireOnceGuard, target: DispatchTarget): Promise<Lease> {
    const outcome = await guard.acquire(target);
    if (outcome.kind !== 'acquired') throw new Error(`expected acquired, got ${outcome.kind}`);
    dispatches++;
    return outcome.lease;
  }

  const detours = () => detourReplies(nodes);

  /**
   * Resolves, with `call`'s outcome to await, once `call` has settled or more than `replies`
   * detours have been answered: more than a client that gave up would have drawn.
   */
  async function outlast<T>(call: Promise<T>, replies: number): Promise<{ outcome: Promise<T | unknown> }> {
    let settled = false;
    const outcome = call.catch((err: unknown) => err).finally(() => (settled = true));
    const before = await detours();
    await waitFor(`the call to settle or draw ${replies} detours`, async () => settled || (await detours()) > before + replies, REPLICATION_PACE);
    return { outcome };
  }

  /** The next invocation, once the lock is gone (its TTL ran out, had the commit left it): fast-forward, or a second dispatch. */
  async function nextInvocation(guard: FireOnceGuard, held: Lease, owner: NodeAddress): Promise<void> {
    await nodes.node(owner).del(held.lockKey);
    const next = await guardOf({ keyPrefix: guard.options.keyPrefix }).acquire(held.target);
    if (next.kind === 'acquired') dispatches++;
  }

  it('a commit answered TRYAGAIN for longer than ioredis follows is sent again until the slot has moved, and its result stands', async () => {
    const guard = guardOf();
    const { target, slot } = await targetOn(cluster, guard, first);
    const held = await lease(guard, target);
    // The slot opens with nothing moved yet: the first master holds the lock but not the artifact
    // key, and answers the commit TRYAGAIN until the lock has moved and the slot is the second's.
    await migrateSlot(nodes, slot, first, second, []);
    // ioredis follows 16 replies for one command: more than 24 means the commit outlasted that.
    const committed = await outlast(guard.commit(held, Buffer.from('result')), 24);
    await migrateSlot(nodes, slot, first, second);
    const outcome = await committed.outcome;
    await nextInvocation(guard, held, second);
    expect({ dispatches, outcome }).toEqual({ dispatches: 1, outcome: { ours: true, stored: true, waiters: [] } });
  });

  /**
   * A guard that waits for 1 replica, and a target of the second master (which has none): its
   * acquire takes the lock there, then, before its confirm, the slot starts moving to the first
   * master (which has one) with the lock. The confirm is answered ASK, then TRYAGAIN where the
   * lock went (the waiters key is missing there), and sent again while the slot moves.
   */
  async function lockMovingBeforeConfirm(): Promise<{ guard: FireOnceGuard; target: DispatchTarget; slot: number; lockKey: string }> {
    const guard = guardOf({ replicaSync: { replicas: 1, timeoutMs: 200 } });
    const { target, slot } = await targetOn(cluster, guard, second);
    const lockKey = guard.keys.lock(target.scope, target.step);
    const replicas = (guard as unknown as { replicas: { confirm: (...args: unknown[]) => Promise<unknown> } }).replicas;
    const confirm = replicas.confirm.bind(replicas);
    replicas.confirm = (...args: unknown[]) => migrateSlot(nodes, slot, second, first, [lockKey]).then(() => confirm(...args));
    return { guard, target, slot, lockKey };
  }

  it('an acquire whose lock moves mid-migration before its confirm is acknowledged where it went, once the slot has moved', async () => {
    const { guard, target, slot, lockKey } = await lockMovingBeforeConfirm();
    const tryAgains = await errorReplies(nodes, first, 'TRYAGAIN');
    let settled = false;
    const acquiring = guard.acquire(target).finally(() => (settled = true));
    const answered = async () => settled || (await errorReplies(nodes, first, 'TRYAGAIN')) > tryAgains;
    await waitFor('the confirm to be answered TRYAGAIN where the lock went', answered, REPLICATION_PACE);
    await migrateSlot(nodes, slot, second, first); // the migration ends while the confirm is sent again
    const outcome = await acquiring;
    if (outcome.kind === 'acquired') dispatches++;
    expect({ dispatches, kind: outcome.kind }).toEqual({ dispatches: 1, kind: 'acquired' });
    expect(await nodes.node(first).pttl(lockKey)).toBeGreaterThan(0); // re-armed there, and its replica acknowledged it
  });

  it('an acquire undone mid-migration (its confirm failed closed) leaves no lock once the slot has moved', async () => {
    // The migration goes on until the confirm's tries run out: the lock is undone.
    const { guard, target, slot, lockKey } = await lockMovingBeforeConfirm();
    const err = await guard.acquire(target).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(FireOnceStoreUnavailable);
    expect((err as Error).message).toMatch(/is moving \(TRYAGAIN [^)]*\)/);
    // Read by slot: a plain EXISTS on the importing master would be answered MOVED.
    const gone = async () => !((await nodes.node(first).cluster('GETKEYSINSLOT', slot, 100)) as string[]).includes(lockKey);
    const before = await detours();
    await waitFor('the undo to draw more detours than ioredis follows', async () => (await gone()) || (await detours()) > before + 24, REPLICATION_PACE);
    await migrateSlot(nodes, slot, second, first);
    await waitFor('the undone lock to be gone where it moved', gone, REPLICATION_PACE);
  });

  it('a commit with replica sync, whose slot migrates to a master the client does not know yet, lands once the slot has moved', async () => {
    const spare = nodes.spare!;
    const guard = guardOf({ replicaSync: { replicas: 1, timeoutMs: 200 } });
    const { target, slot } = await targetOn(cluster, guard, first);
    const held = await lease(guard, target);
    // The lock moves to the spare mid-migration: the first master answers the commit ASK, naming
    // a node this client has no connection to.
    try {
      await migrateSlot(nodes, slot, first, spare, [held.lockKey]);
      expect(cluster.nodes('all').map(({ options }) => options.port)).not.toContain(spare.port);
      // The guard follows 2 redirects of a write it waits for: more than 4 means the commit was sent again.
      const committed = await outlast(guard.commit(held, Buffer.from('result')), 4);
      await migrateSlot(nodes, slot, first, spare);
      const outcome = await committed.outcome;
      await nextInvocation(guard, held, spare);
      expect({ dispatches, outcome }).toEqual({ dispatches: 1, outcome: { ours: true, stored: true, waiters: [] } });
    } finally {
      await giveBack(slot);
    }
  });

  /** Move `slot` from the spare back to the first master, ending its migration first if need be: the spare keeps no slot, so no client knows it. */
  async function giveBack(slot: number): Promise<void> {
    await migrateSlot(nodes, slot, first, nodes.spare!).catch(() => undefined); // refused if the spare owns it already
    await migrateSlot(nodes, slot, nodes.spare!, first);
  }

  /**
   * Have the commit of `held` wait on the spare, which answers nothing for 2 s (`CLIENT PAUSE
   * ALL`), then have `client` refresh its slot map, which does not list the spare mid-migration:
   * ioredis closes its connection there, and the reply never comes. Resolves, with the commit's
   * outcome to await, once the commit failed or was sent to the first master again.
   */
  async function closeUnderCommit(client: Cluster, guard: FireOnceGuard, held: Lease): Promise<{ outcome: Promise<unknown> }> {
    const asks = () => errorReplies(nodes, first, 'ASK'); // the commit is answered ASK there, naming the spare
    let settled = false;
    const before = await asks();
    await nodes.node(nodes.spare!).call('CLIENT', 'PAUSE', '2000', 'ALL');
    const outcome = guard
      .commit(held, Buffer.from('result'))
      .catch((err: unknown) => err)
      .finally(() => (settled = true));
    await waitFor('the commit to be sent to the spare', async () => settled || (await asks()) > before, REPLICATION_PACE);
    const sent = await asks();
    client.refreshSlotsCache();
    await waitFor('the commit to fail, or to be sent again', async () => settled || (await asks()) > sent, REPLICATION_PACE);
    return { outcome };
  }

  /** The commit of a lease on the first master, its lock moved to the spare mid-migration and `client` connected there, closed under it. */
  async function commitClosedUnder(client: Cluster, guard: FireOnceGuard): Promise<void> {
    const spare = nodes.spare!;
    const { target, slot } = await targetOn(client, guard, first);
    const held = await lease(guard, target);
    try {
      await migrateSlot(nodes, slot, first, spare, [held.lockKey]);
      await client.exists(held.lockKey); // answered ASK, which ioredis follows: it connects to the spare
      const { outcome } = await closeUnderCommit(client, guard, held);
      await migrateSlot(nodes, slot, first, spare);
      const committed = await outcome;
      await nextInvocation(guard, held, spare);
      expect({ dispatches, committed }).toEqual({ dispatches: 1, committed: { ours: true, stored: true, waiters: [] } });
    } finally {
      await giveBack(slot);
    }
  }

  it('a commit whose connection to the master its slot migrates to is closed under it is sent again, and its result stands', async () => {
    // ioredis gives a command up at its second detour: here, the connection closed under it.
    const client = new Cluster([...nodes.masters], { maxRedirections: 1 });
    try {
      await commitClosedUnder(client, guardOf({ redis: client }));
    } finally {
      client.disconnect();
    }
  });

  it('a commit with replica sync whose connection to the master its slot migrates to is closed under it is sent again, and stands', async () => {
    // Tries 250 ms apart: sent again until the spare answers again and the slot has moved.
    const client = new Cluster([...nodes.masters], { retryDelayOnTryAgain: 250 });
    try {
      await commitClosedUnder(client, guardOf({ redis: client, replicaSync: { replicas: 1, timeoutMs: 200 } }));
    } finally {
      client.disconnect();
    }
  });
});
