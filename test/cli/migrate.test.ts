import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { defaultPayloadConverter } from '@temporalio/common';
import type { Redis } from 'ioredis';
import { FireOnceGuard } from '../../src';
import { FireOnceKeys, encodeId } from '../../src/core';
import { payloadToBytes } from '../../src/worker/artifact';
import { connectRedis, deletePrefix, testPrefix } from '../support/redis';
import { scanKeys } from '../support/bystander';
import { runCli } from './run-cli';

// Keys written by the previous release (protocol v2), with its own scripts (test/fixtures/protocol-v2,
// copied from commit 28a8216), then moved to v3 by `fire-once migrate`.
const V2 = join(__dirname, '..', 'fixtures', 'protocol-v2');

describe('fire-once migrate: protocol v2 keys into v3', () => {
  let redis: Redis;
  const prefixes: string[] = [];
  beforeAll(() => {
    redis = connectRedis();
    redis.defineCommand('v2Acquire', { numberOfKeys: 3, lua: readFileSync(join(V2, 'acquire.lua'), 'utf8') });
    redis.defineCommand('v2Commit', { numberOfKeys: 2, lua: readFileSync(join(V2, 'commit.lua'), 'utf8') });
  });
  afterAll(async () => {
    for (const prefix of prefixes) await deletePrefix(redis, prefix);
    await redis.quit();
  });

  type V2Client = Redis & {
    v2Acquire(...args: (string | number)[]): Promise<unknown>;
    v2Commit(...args: (string | number | Buffer)[]): Promise<unknown>;
  };

  /** Acquire (and, with a payload, commit) one v2 step exactly as the previous release did. */
  async function v2Dispatch(prefix: string, scope: string, step: string, payload?: Buffer, argsHash = ''): Promise<void> {
    const base = `${prefix}:{${encodeId('scope', scope)}}`;
    const [artifact, lock, fence] = [
      `${base}:artifact:${encodeId('jobType', step)}`,
      `${base}:lock:${encodeId('step', step)}`,
      `${base}:fence:${encodeId('step', step)}`,
    ];
    const token = randomUUID();
    const client = redis as V2Client;
    await client.v2Acquire(artifact, lock, fence, token, 60_000, 'result', 'wf run act', argsHash, 3_600_000);
    if (payload !== undefined) await client.v2Commit(artifact, lock, token, payload, 3_600_000, argsHash, '');
  }

  const cli = (prefix: string, ...args: string[]) => runCli(['migrate', '--prefix', prefix, '--redis', process.env.REDIS_URL!, ...args]);

  it('copies every v2 result into the v3 namespace with its TTL, marks the prefix v3, and the guard fast-forwards to the same bytes', async () => {
    const prefix = testPrefix('migrate');
    prefixes.push(prefix);
    const payloads = ['session-1', 'chat:7*{x}'].map(
      (scope) => [scope, payloadToBytes(defaultPayloadConverter.toPayload({ summary: `of ${scope}` }))] as const,
    );
    for (const [scope, payload] of payloads) await v2Dispatch(prefix, scope, 'summarise', payload, 'h-args');

    const run = await cli(prefix, '--json', '--namespace', 'tenant-a');
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    expect(JSON.parse(run.stdout)).toMatchObject({ copied: 2, kept: 0, inFlight: [], deleted: 0, done: true, namespace: 'tenant-a' });
    expect(await redis.get(`${prefix}:protocol`)).toBe('3');

    const guard = new FireOnceGuard({ redis, keyPrefix: prefix, namespace: 'tenant-a' });
    for (const [scope, payload] of payloads) {
      const outcome = await guard.acquire({ scope, step: 'summarise', jobType: 'summarise', argsHash: 'h-args' });
      expect(outcome.kind).toBe('fast-forward');
      expect(Buffer.compare((outcome as { artifact: Buffer }).artifact, payload)).toBe(0);
      const ttl = await redis.pttl(guard.keys.artifact(scope, 'summarise'));
      expect(ttl).toBeGreaterThan(3_500_000);
      expect(ttl).toBeLessThanOrEqual(3_600_000);
    }
    // The args hash came along: other arguments are still a conflict.
    await expect(guard.acquire({ scope: 'session-1', step: 'summarise', jobType: 'summarise', argsHash: 'other' })).rejects.toThrow(/other arguments/);
    // Other namespaces see nothing of it.
    const other = new FireOnceGuard({ redis, keyPrefix: prefix });
    expect((await other.acquire({ scope: 'session-1', step: 'summarise', jobType: 'summarise' })).kind).toBe('acquired');

    // Run again with --delete: nothing new to copy (v3 keeps what it has), the v2 keys go.
    const again = await cli(prefix, '--json', '--namespace', 'tenant-a', '--delete');
    expect(JSON.parse(again.stdout)).toMatchObject({ copied: 0, kept: 2, done: true });
    expect(JSON.parse(again.stdout).deleted).toBeGreaterThanOrEqual(4); // two artifacts, two locks, two fencing counters
    const left = await scanKeys(redis, `${prefix}:{*`);
    expect(left).toEqual([]);
  });

  it('under a prefix with no key of 0.1 and no marker, only marks it, and says so (the admin step for workers that may not write the marker, or a mistyped prefix)', async () => {
    const prefix = testPrefix('migrate-fresh');
    prefixes.push(prefix);
    const fresh = await cli(prefix);
    expect([fresh.code, fresh.stderr]).toEqual([0, '']);
    expect(fresh.stdout).toBe(
      `no key of 0.1 under ${prefix}:{*: nothing to copy\nprefix ${prefix} is now marked protocol 3 (${prefix}:protocol), as workers whose Redis user may not write the marker need; if the prefix is mistyped, delete that key\n`,
    );
    expect(await scanKeys(redis, `${prefix}:*`)).toEqual([`${prefix}:protocol`]);
    expect(await redis.get(`${prefix}:protocol`)).toBe('3');
    // Once marked, a run again is an ordinary one, with nothing to copy.
    const again = await cli(prefix, '--json');
    expect(JSON.parse(again.stdout)).toMatchObject({ copied: 0, done: true, markedOnly: false });
  });

  it('refuses (exit 5) and copies nothing while a v2 dispatch is in flight', async () => {
    const prefix = testPrefix('migrate-busy');
    prefixes.push(prefix);
    await v2Dispatch(prefix, 'done', 'summarise', Buffer.from('x'));
    await v2Dispatch(prefix, 'busy', 'summarise'); // acquired, never committed
    const run = await cli(prefix);
    expect(run.code).toBe(5);
    expect(run.stdout).toContain('nothing migrated: 1 v2 lock(s) of dispatches in flight');
    expect(run.stderr).toMatch(/stop the v2 workers/);
    expect(await redis.exists(`${prefix}:protocol`, new FireOnceKeys(prefix).artifact('done', 'summarise'))).toBe(0);
  });

  /** Every key under the prefix with its type, value and whether it expires: to show that nothing changed. */
  async function snapshot(prefix: string): Promise<Record<string, string>> {
    const out: Record<string, string> = {};
    for (const key of (await scanKeys(redis, `${prefix}:*`)).sort()) {
      const type = await redis.type(key);
      const value = type === 'hash' ? JSON.stringify(await redis.hgetall(key)) : type === 'string' ? await redis.get(key) : type;
      out[key] = `${type} ${value} ${(await redis.pttl(key)) > 0 ? 'expires' : 'persists'}`;
    }
    return out;
  }

  it('refuses (exit 5) a prefix whose marker names another protocol version, before copying anything', async () => {
    const prefix = testPrefix('migrate-other');
    prefixes.push(prefix);
    await v2Dispatch(prefix, 'done', 'summarise', Buffer.from('x'));
    await redis.set(`${prefix}:protocol`, '4');
    const before = await snapshot(prefix);
    for (const args of [[], ['--delete']]) {
      const run = await cli(prefix, ...args);
      expect(run.stderr).toMatch(/written with fire-once protocol "4"/);
      expect(run.code).toBe(5);
      expect(await snapshot(prefix)).toEqual(before);
    }
  });

  it("--delete deletes only what it read as v2's own (the artifacts it copied, committed locks, fencing counters) and reports the keys it left", async () => {
    const prefix = testPrefix('migrate-foreign');
    prefixes.push(prefix);
    await v2Dispatch(prefix, 's1', 'summarise', Buffer.from('result'));
    // v2-shaped keys this library never wrote: a hash without the payload field, where an artifact would be.
    const foreign = `${prefix}:{s1}:artifact:st`;
    await redis.hset(foreign, 'x', 'not an artifact');
    const run = await cli(prefix, '--json', '--delete');
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    const result = JSON.parse(run.stdout) as { copied: number; deleted: number; skipped: { key: string; what: string }[] };
    expect(result).toMatchObject({ copied: 1, deleted: 3, done: true }); // the artifact, its step's lock and fencing counter
    expect(result.skipped).toEqual([{ key: foreign, what: 'a hash without the payload field p, not a v2 artifact' }]);
    expect(await redis.hgetall(foreign)).toEqual({ x: 'not an artifact' });
    expect(await scanKeys(redis, `${prefix}:{*`)).toEqual([foreign]);

    const human = await cli(prefix, '--delete');
    expect(human.code).toBe(0);
    expect(human.stdout).toContain(
      `left 1 key(s) that are not v2 keys this library wrote:\n  ${foreign}: a hash without the payload field p, not a v2 artifact`,
    );
  });

  it('skips and reports v2 keys of another Redis type (no WRONGTYPE reported as an unreachable Redis), and migrates the rest', async () => {
    const prefix = testPrefix('migrate-wrongtype');
    prefixes.push(prefix);
    await v2Dispatch(prefix, 's1', 'summarise', Buffer.from('result'));
    const odd = [`${prefix}:{s2}:lock:x`, `${prefix}:{s2}:artifact:x`, `${prefix}:{s2}:fence:x`];
    await redis.set(odd[0], 'a string lock');
    await redis.rpush(odd[1], 'a list artifact');
    await redis.set(odd[2], 'not a number');
    const run = await cli(prefix, '--json', '--delete');
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    const result = JSON.parse(run.stdout) as { copied: number; deleted: number; skipped: { key: string; what: string }[] };
    expect(result).toMatchObject({ copied: 1, deleted: 3, done: true });
    expect(result.skipped.sort((a, b) => a.key.localeCompare(b.key))).toEqual([
      { key: odd[1], what: 'a list, not a v2 artifact' },
      { key: odd[2], what: 'a string that is not a counter, not a v2 fencing counter' },
      { key: odd[0], what: 'a string, not a v2 lock' },
    ]);
    expect((await scanKeys(redis, `${prefix}:{*`)).sort()).toEqual([...odd].sort());
  });

  it.each([
    ['does not percent-decode', '{bad%ZZ}:artifact:summarise'],
    ['decodes to an ID the guard refuses', '{%20%20}:artifact:summarise'],
    ['does not percent-decode', '{s1}:lock:%E0%A4'],
    ['v2 would have encoded otherwise (a needless escape)', '{fin%65}:artifact:summarise'],
    ['v2 would have encoded otherwise (a raw colon)', '{a:b}:artifact:summarise'],
    ['v2 would have encoded otherwise (a lower-case escape)', '{s1}:fence:a%3ab'],
  ])('refuses (exit 8), changing nothing, when a v2-shaped key names an ID that %s: %s', async (_why, tail) => {
    const prefix = testPrefix('migrate-undecodable');
    prefixes.push(prefix);
    await v2Dispatch(prefix, 'fine', 'summarise', Buffer.from('result'));
    const bad = `${prefix}:${tail}`;
    await redis.hset(bad, 'p', 'x', 'h', '');
    const before = await snapshot(prefix);
    const run = await cli(prefix, '--delete');
    expect(run.stderr).toContain(`1 key(s) under ${prefix}:{ have the v2 layout but IDs that cannot be read back, so this library did not write them: ${bad}`);
    expect(run.code).toBe(8);
    expect(await snapshot(prefix)).toEqual(before);
  });

  it("never reads a key v2 did not write as another scope's result: a needless escape of the scope is refused (exit 8), and the real result stays", async () => {
    const prefix = testPrefix('migrate-twin');
    prefixes.push(prefix);
    const real = payloadToBytes(defaultPayloadConverter.toPayload('the real summary'));
    await v2Dispatch(prefix, 'fine', 'summarise', real);
    // `fin%65` decodes to `fine`, but v2 wrote `fine`: this hash is someone else's, not v2's.
    await redis.hset(`${prefix}:{fin%65}:artifact:summarise`, 'p', payloadToBytes(defaultPayloadConverter.toPayload('forged')), 'h', '');
    const run = await cli(prefix, '--delete');
    expect(run.stderr).toContain(`${prefix}:{fin%65}:artifact:summarise`);
    expect(run.code).toBe(8);
    const guard = new FireOnceGuard({ redis, keyPrefix: prefix });
    expect(await redis.exists(guard.keys.artifact('fine', 'summarise'))).toBe(0);
    expect(await redis.hgetBuffer(`${prefix}:{fine}:artifact:summarise`, 'p')).toEqual(real);
  });
});
