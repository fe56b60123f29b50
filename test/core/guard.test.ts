import { createServer, type AddressInfo, type Server } from 'node:net';
import { Cluster, Redis } from 'ioredis';
import {
  FireOnceConfigError,
  FireOnceGuard,
  FireOnceInFlight,
  FireOnceInvalidId,
  FireOnceProtocolError,
  FireOnceStoreUnavailable,
  type DispatchTarget,
  type Lease,
} from '../../src';
import { ParkingLot, WakeHub, waitForTurn, type AcquireOptions, type WaitOptions } from '../../src/core';
import { useGuardFixture } from '../support/redis';
import { lockToken } from '../support/records';

describe('FireOnceGuard on Redis alone', () => {
  const fx = useGuardFixture('guard', { lockTtlMs: 30_000, artifactTtlMs: 60_000 });
  let redis: Redis;
  let prefix: string;
  let guard: FireOnceGuard;
  beforeEach(() => ({ redis, prefix, guard } = fx));
  const target = { scope: 'session-1', step: 'dispatch', jobType: 'summary' };

  it('gives the lock to exactly one of 100 concurrent acquires, each on its own connection', async () => {
    const clients = Array.from({ length: 10 }, () => new Redis(process.env.REDIS_URL as string));
    try {
      const guards = clients.map((c) => new FireOnceGuard({ redis: c, keyPrefix: prefix }));
      const outcomes = await Promise.all(Array.from({ length: 100 }, (_, i) => guards[i % guards.length].acquire(target)));
      const acquired = outcomes.filter((o) => o.kind === 'acquired');
      expect(acquired).toHaveLength(1);
      expect(outcomes.filter((o) => o.kind === 'held')).toHaveLength(99);
      expect(await lockToken(redis, guard.keys.lock(target.scope, target.step))).toBe((acquired[0] as { lease: Lease }).lease.token);
    } finally {
      clients.forEach((c) => c.disconnect());
    }
  });

  it('uses a fresh random token per acquire and sets the lock TTL', async () => {
    const first = await guard.acquire(target, { lockTtlMs: 5_000 });
    if (first.kind !== 'acquired') throw new Error(`expected acquired, got ${first.kind}`);
    expect(first.lease.token).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    const pttl = await redis.pttl(first.lease.lockKey);
    expect(pttl).toBeGreaterThan(0);
    expect(pttl).toBeLessThanOrEqual(5_000);
    await guard.release(first.lease);
    const second = await guard.acquire(target);
    if (second.kind !== 'acquired') throw new Error(`expected acquired, got ${second.kind}`);
    expect(second.lease.token).not.toBe(first.lease.token);
  });

  it('writes into the lock the digits of the fencing token it returns, microseconds padded to six', async () => {
    // The server clock's microseconds fall below 100000, the digits acquire.lua pads, for 100 ms of
    // every second: acquiring one step after another for up to 3 s meets that case several times.
    const deadline = Date.now() + 3_000;
    let padded = 0;
    for (let i = 0; padded < 3 && Date.now() < deadline; i++) {
      const outcome = await guard.acquire({ ...target, step: `fencing-${i}` });
      if (outcome.kind !== 'acquired') throw new Error(`expected acquired, got ${outcome.kind}`);
      expect((await redis.get(outcome.lease.lockKey))?.split(' ')[1]).toBe(String(outcome.lease.fencingToken));
      if (outcome.lease.fencingToken % 1_000_000 < 100_000) padded++;
    }
    expect(padded).toBe(3);
  });

  it('round-trips the artifact byte for byte, sets its TTL, and the artifact takes over from the lock in one step', async () => {
    const outcome = await guard.acquire(target);
    if (outcome.kind !== 'acquired') throw new Error('expected acquired');
    const bytes = Buffer.from([0, 0xff, 0x80, 0x0a, 0x00, 0x7b]);
    expect(await guard.commit(outcome.lease, bytes)).toEqual({ ours: true, stored: true, waiters: [] });
    expect(await redis.exists(outcome.lease.lockKey)).toBe(0);
    const artifactTtl = await redis.pttl(outcome.lease.artifactKey);
    expect(artifactTtl).toBeGreaterThan(30_000);
    expect(artifactTtl).toBeLessThanOrEqual(60_000);
    const again = await guard.acquire(target);
    expect(again.kind).toBe('fast-forward');
    expect(Buffer.compare((again as { artifact: Buffer }).artifact, bytes)).toBe(0);
  });

  it("refuses to release with a stale token: a stale owner never deletes a newer owner's lock", async () => {
    const a = await guard.acquire(target, { lockTtlMs: 50 });
    if (a.kind !== 'acquired') throw new Error('expected acquired');
    await new Promise((r) => setTimeout(r, 120));
    const b = await guard.acquire(target);
    if (b.kind !== 'acquired') throw new Error('expected B to acquire after A expired');
    expect((await guard.release(a.lease)).ours).toBe(false);
    expect(await lockToken(redis, b.lease.lockKey)).toBe(b.lease.token);
    expect((await guard.release(b.lease)).ours).toBe(true);
  });

  it('reports the holder TTL when held', async () => {
    await guard.acquire(target);
    const held = await guard.acquire(target);
    expect(held.kind).toBe('held');
    expect((held as { ttlMs: number }).ttlMs).toBeGreaterThan(0);
  });

  it('scopes artifacts: another scope or job type neither sees nor touches them', async () => {
    const a = await guard.acquire(target);
    if (a.kind !== 'acquired') throw new Error('expected acquired');
    await guard.commit(a.lease, Buffer.from('A'));
    expect((await guard.acquire({ ...target, scope: 'session-2' })).kind).toBe('acquired');
    // Same step, other job type: the commit deleted the step's lock, so it no longer blocks.
    expect((await guard.acquire({ ...target, jobType: 'other' })).kind).toBe('acquired');
    expect((await guard.acquire({ ...target, step: 'other-step', jobType: 'other' })).kind).toBe('acquired');
    expect((await guard.acquire(target)).kind).toBe('fast-forward');
  });

  it('checks an external artifact key for existence and never writes it', async () => {
    const external = `${guard.keys.scopeBase(target.scope)}:job-result`;
    const ext = { ...target, externalArtifactKey: external };
    const a = await guard.acquire(ext);
    expect(a.kind).toBe('acquired');
    expect(await redis.exists(external)).toBe(0);
    await redis.xadd(external, '*', 'done', '1');
    expect((await guard.acquire(ext)).kind).toBe('fast-forward');
  });

  it('refuses invalid IDs before asking Redis anything', async () => {
    // The prefix's keys, not DBSIZE: other test files write to the same server at the same time.
    const keys = () => redis.keys(`${prefix}*`);
    const before = await keys();
    await expect(guard.acquire({ ...target, scope: '  ' })).rejects.toBeInstanceOf(FireOnceInvalidId);
    await expect(guard.acquire({ ...target, step: '' })).rejects.toThrow(/step must not be empty/);
    expect(await keys()).toEqual(before);
  });

  // The args hash goes into the lock, artifact and waiter records between separators: one with a
  // space or colon, or longer than a record carries, would write a result the guard cannot read
  // back, or make a call conflict with its own arguments.
  it.each([['h'.repeat(65)], ['a:b'], ['a b'], [7 as unknown as string]])('refuses the args hash %j before asking Redis anything', async (argsHash) => {
    const keys = () => redis.keys(`${prefix}*`);
    const before = await keys();
    await expect(guard.acquire({ ...target, argsHash })).rejects.toThrow(
      new FireOnceInvalidId(`argsHash must be base64url, at most 64 characters (got ${JSON.stringify(argsHash)})`),
    );
    await expect(new ParkingLot(guard).park({ ...target, argsHash }, Buffer.from('token'))).rejects.toBeInstanceOf(FireOnceInvalidId);
    expect(await keys()).toEqual(before);
  });

  it('refuses a target field or per-call option with an unknown name, before asking Redis anything, as the Python dataclasses do', async () => {
    // A misspelt namespace would file the call under the guard's default namespace, and share that
    // namespace's locks and results; a misspelt argsHash would skip the conflict check.
    const other = new FireOnceGuard({ redis, keyPrefix: prefix, namespace: 'tenant-a' });
    const stored = await other.acquire(target);
    if (stored.kind !== 'acquired') throw new Error(stored.kind);
    await other.commit(stored.lease, Buffer.from('tenant-a result'));
    const keys = () => redis.keys(`${prefix}*`);
    const before = await keys();
    const misspelt = { ...target, namespce: 'tenant-b' } as unknown as DispatchTarget;
    await expect(other.acquire(misspelt)).rejects.toThrow(new FireOnceConfigError('acquire: unknown target field "namespce"'));
    await expect(other.acquire({ ...target, argHash: 'h1' } as unknown as DispatchTarget)).rejects.toThrow('acquire: unknown target field "argHash"');
    await expect(other.acquire(target, { lockTTLMs: 5 } as unknown as AcquireOptions)).rejects.toThrow('acquire: unknown option "lockTTLMs"');
    await expect(new ParkingLot(other).park(misspelt, Buffer.from('token'))).rejects.toThrow('park: unknown target field "namespce"');
    expect(await keys()).toEqual(before);
    // A misspelt artifact TTL on commit would store the result for the guard's default TTL.
    const held = await other.acquire({ ...target, scope: 'session-2' });
    if (held.kind !== 'acquired') throw new Error(held.kind);
    const commitOptions = { artifactTTLMs: 5_000 } as unknown as { artifactTtlMs?: number };
    await expect(other.commit(held.lease, Buffer.from('r'), commitOptions)).rejects.toThrow(new FireOnceConfigError('commit: unknown option "artifactTTLMs"'));
    expect(await redis.exists(held.lease.artifactKey)).toBe(0);
  });

  // A lease names the keys that commit, release and extend write. One from a guard of another
  // prefix, or edited by hand, would write another scope's artifact or fail to wake its waiters.
  it("refuses a lease whose keys are not this guard's for its target, and writes nothing", async () => {
    const held = await guard.acquire({ ...target, scope: 'lease-owner' });
    if (held.kind !== 'acquired') throw new Error(held.kind);
    const victim = guard.keys.artifact('victim', target.jobType);
    const elsewhere = new FireOnceGuard({ redis, keyPrefix: `${prefix}-other` });
    const forged: Lease = { ...held.lease, artifactKey: victim };
    const message = (what: string) =>
      new FireOnceConfigError(
        `${what}: the lease's keys are not this guard's for its target (keyPrefix ${JSON.stringify(`${prefix}-other`)}): pass the lease acquire() returned, unchanged, to a guard with the keyPrefix that acquired it`,
      );
    await expect(elsewhere.commit(held.lease, Buffer.from('r'))).rejects.toThrow(message('commit'));
    await expect(elsewhere.release(held.lease)).rejects.toThrow(message('release'));
    await expect(elsewhere.extend(held.lease, 5_000)).rejects.toThrow(message('extend'));
    await expect(elsewhere.keep(held.lease, 5_000)).rejects.toThrow(message('keep'));
    await expect(elsewhere.handBack(held.lease, [Buffer.from('w')])).rejects.toThrow(message('handBack'));
    await expect(guard.commit(forged, Buffer.from('not the victim result'))).rejects.toBeInstanceOf(FireOnceConfigError);
    await expect(guard.commit({ ...held.lease, waitersKey: guard.keys.waiters('victim', target.step) }, Buffer.from('r'))).rejects.toBeInstanceOf(
      FireOnceConfigError,
    );
    expect(await redis.exists(victim, held.lease.artifactKey, guard.keys.waiters('victim', target.step))).toBe(0);
    expect(await lockToken(redis, held.lease.lockKey)).toBe(held.lease.token);
    // The lease itself still works with the guard that acquired it, and with another of its prefix.
    const same = new FireOnceGuard({ redis, keyPrefix: prefix });
    expect(await same.commit(held.lease, Buffer.from('r'))).toEqual({ ours: true, stored: true, waiters: [] });
  });

  it('validates options, naming the field', () => {
    expect(() => new FireOnceGuard({ redis, lockTtlMs: -5 })).toThrow(new FireOnceConfigError('lockTtlMs must be a positive integer (got -5)'));
    expect(() => new FireOnceGuard({ redis, artifactTtlMs: NaN })).toThrow('artifactTtlMs must be a positive integer (got NaN)');
    expect(() => new FireOnceGuard({ redis, lockTtlMs: 0 })).toThrow('lockTtlMs must be a positive integer (got 0)');
    expect(() => new FireOnceGuard({ redis, lockTtlMs: 1e15 })).toThrow(/lockTtlMs must be at most/);
    expect(() => new FireOnceGuard({ redis, keyPrefix: 'a{b}' })).toThrow(/keyPrefix must be/);
    expect(() => new FireOnceGuard({ redis: {} as Redis })).toThrow(/redis must be an ioredis/);
    // An ioredis keyPrefix would prefix the keys, but not the pub/sub messages that name them, nor
    // what the CLI and the Python package read.
    const prefixed = new Redis({ lazyConnect: true, keyPrefix: 'app:' });
    const prefixedCluster = new Cluster([], { lazyConnect: true, keyPrefix: 'app:' });
    for (const client of [prefixed, prefixedCluster])
      expect(() => new FireOnceGuard({ redis: client })).toThrow(
        new FireOnceConfigError(
          'redis has the ioredis option keyPrefix "app:", which the guard cannot work under: it names its keys itself, and pub/sub messages, the CLI and the Python package see them unprefixed; give the guard keyPrefix instead, on a client without one',
        ),
      );
    prefixed.disconnect();
    prefixedCluster.disconnect();
    expect(() => new FireOnceGuard({ redis, lockTTL: 5 } as never)).toThrow('temporal-fire-once: unknown option "lockTTL"');
  });

  it('fails closed with FireOnceStoreUnavailable when Redis refuses connections', async () => {
    const dead = new Redis({ port: 1, lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
    dead.on('error', () => undefined);
    const deadGuard = new FireOnceGuard({ redis: dead, keyPrefix: prefix, storeTimeoutMs: 2_000 });
    try {
      const err = await deadGuard.acquire(target).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(FireOnceStoreUnavailable);
      expect((err as FireOnceStoreUnavailable).retryable).toBe(true);
      expect((err as FireOnceStoreUnavailable).context).toMatchObject({ scope: 'session-1', step: 'dispatch' });
    } finally {
      dead.disconnect();
    }
  });

  it('fails with the non-retryable FireOnceProtocolError, not a retryable store error, when the lock or waiters key holds another Redis type', async () => {
    for (const key of [guard.keys.lock('s-lock', 'dispatch'), guard.keys.waiters('s-waiters', 'dispatch')]) await redis.hset(key, 'f', 'v');
    const acquired = await guard.acquire({ ...target, scope: 's-waiters' });
    if (acquired.kind !== 'acquired') throw new Error(acquired.kind);
    for (const call of [() => guard.acquire({ ...target, scope: 's-lock' }), () => guard.commit(acquired.lease, Buffer.from('done'))]) {
      const err = await call().catch((e: unknown) => e);
      expect(err).toBeInstanceOf(FireOnceProtocolError);
      expect((err as FireOnceProtocolError).retryable).toBe(false);
      expect((err as Error).message).toMatch(/holds a Redis type this library never writes there \(.*WRONGTYPE/); // Redis before 7.0 wraps it
    }
    expect(await redis.hgetall(guard.keys.lock('s-lock', 'dispatch'))).toEqual({ f: 'v' });
  });

  describe('waitForTurn', () => {
    it('returns the artifact once the holder commits', async () => {
      const holder = await guard.acquire(target);
      if (holder.kind !== 'acquired') throw new Error('expected acquired');
      const held = await guard.acquire(target);
      if (held.kind !== 'held') throw new Error('expected held');
      setTimeout(() => void guard.commit(holder.lease, Buffer.from('done')), 100);
      const outcome = await waitForTurn(guard, target, held, {}, { pollIntervalMs: 20, deadline: Date.now() + 5_000 });
      expect(outcome.kind).toBe('fast-forward');
    });

    it.each<[string, Record<string, unknown>, string]>([
      ['a NaN poll interval', { pollIntervalMs: NaN }, 'waitForTurn: pollIntervalMs must be a positive integer (got NaN)'],
      ['a zero poll interval', { pollIntervalMs: 0 }, 'waitForTurn: pollIntervalMs must be a positive integer (got 0)'],
      ['a poll interval past what a timer can wait', { pollIntervalMs: 2 ** 31 }, 'waitForTurn: pollIntervalMs must be at most 2147483647 ms (got 2147483648)'],
      ['no poll interval (a misspelt name)', { pollInterval: 20 }, 'waitForTurn: unknown option "pollInterval"'],
      ['a NaN deadline', { deadline: NaN }, 'waitForTurn: deadline must be a finite number of epoch milliseconds (got NaN)'],
      ['no deadline', { deadline: undefined }, 'waitForTurn: deadline must be a finite number of epoch milliseconds (got undefined)'],
    ])('refuses %s with FireOnceConfigError, where it would poll Redis every millisecond, for ever', async (_name, bad, message) => {
      const holder = await guard.acquire(target);
      if (holder.kind !== 'acquired') throw new Error('expected acquired');
      const held = await guard.acquire(target);
      if (held.kind !== 'held') throw new Error('expected held');
      const acquires = jest.spyOn(guard, 'acquire'); // the wait's polls: none, it is refused first
      const options = { pollIntervalMs: 20, deadline: Date.now() + 5_000, signal: AbortSignal.timeout(500), ...bad } as unknown as WaitOptions;
      if ('pollInterval' in bad) delete (options as { pollIntervalMs?: number }).pollIntervalMs;
      await expect(waitForTurn(guard, target, held, {}, options)).rejects.toThrow(new FireOnceConfigError(message));
      expect(acquires).not.toHaveBeenCalled();
      acquires.mockRestore();
    });

    it('competes again and acquires when the holder fails and releases', async () => {
      const holder = await guard.acquire(target);
      if (holder.kind !== 'acquired') throw new Error('expected acquired');
      const held = await guard.acquire(target);
      if (held.kind !== 'held') throw new Error('expected held');
      setTimeout(() => void guard.release(holder.lease), 100);
      const outcome = await waitForTurn(guard, target, held, {}, { pollIntervalMs: 20, deadline: Date.now() + 5_000 });
      expect(outcome.kind).toBe('acquired');
    });

    it('accepts a poll interval of ten minutes, for a wait that leans on the wake channel, and still gives up at its deadline', async () => {
      await guard.acquire(target);
      const held = await guard.acquire(target);
      if (held.kind !== 'held') throw new Error('expected held');
      const err = await waitForTurn(guard, target, held, {}, { pollIntervalMs: 600_000, deadline: Date.now() + 100 }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(FireOnceInFlight);
    });

    it('gives up with a retryable FireOnceInFlight at the deadline', async () => {
      await guard.acquire(target);
      const held = await guard.acquire(target);
      if (held.kind !== 'held') throw new Error('expected held');
      const err = await waitForTurn(guard, target, held, {}, { pollIntervalMs: 20, deadline: Date.now() + 100 }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(FireOnceInFlight);
      expect((err as FireOnceInFlight).retryAfterMs).toBeGreaterThan(0);
      // Not "in flight" alone: a lock kept after a result that was not stored is waited on too.
      expect((err as Error).message).toMatch(
        /^gave up waiting on the lock of step "\w+" in scope "[^"]+", held \d+ ms more: by a dispatch still in flight, or by one that ended without storing its result/,
      );
    });

    // ioredis re-sends a SUBSCRIBE that was on the wire when the connection dropped, and never
    // times it out: a waiter that awaited it would hang for the whole outage. Here the hub's
    // server accepts the connection and never answers, so the subscription never comes.
    it('goes on by polling when the wake subscription does not come up within storeTimeoutMs', async () => {
      const silent: Server = createServer(() => undefined);
      await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
      const hubClient = new Redis({ port: (silent.address() as AddressInfo).port, host: '127.0.0.1' });
      hubClient.on('error', () => undefined);
      const hub = new WakeHub(hubClient);
      const quick = new FireOnceGuard({ redis, keyPrefix: prefix, storeTimeoutMs: 200 });
      try {
        const holder = await quick.acquire(target);
        if (holder.kind !== 'acquired') throw new Error('expected acquired');
        const held = await quick.acquire(target);
        if (held.kind !== 'held') throw new Error('expected held');
        setTimeout(() => void quick.commit(holder.lease, Buffer.from('done')), 100);
        const outcome = await waitForTurn(quick, target, held, {}, { pollIntervalMs: 20, deadline: Date.now() + 5_000, wake: hub });
        expect(outcome.kind).toBe('fast-forward');
      } finally {
        hub.close();
        hubClient.disconnect();
        silent.close();
      }
    });

    it('stops when aborted, with the abort reason', async () => {
      await guard.acquire(target);
      const held = await guard.acquire(target);
      if (held.kind !== 'held') throw new Error('expected held');
      const controller = new AbortController();
      setTimeout(() => controller.abort(new Error('cancelled by test')), 50);
      await expect(waitForTurn(guard, target, held, {}, { pollIntervalMs: 1_000, deadline: Date.now() + 10_000, signal: controller.signal })).rejects.toThrow(
        'cancelled by test',
      );
    });
  });
});
