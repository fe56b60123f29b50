import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Redis } from 'ioredis';
import { FireOnceKeys, PROTOCOL_SCRIPTS, PROTOCOL_VERSION, SCRIPTS_DIR, decodeId, encodeId, parseArtifact, parseLock, type LuaScript } from '../../src/core';
import { FireOnceInvalidId } from '../../src';
import { connectRedis, deletePrefix, testPrefix } from '../support/redis';

// The language-neutral protocol cases (test/conformance/README.md), run against the scripts as the
// TypeScript guard calls them. The Python package runs the same file.

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
interface Step {
  readonly redis?: (string | number)[];
  readonly script?: string;
  readonly keys?: string[];
  readonly args?: (string | number)[];
  readonly expect?: Json;
  readonly state?: Record<string, Record<string, Json>>;
}
interface Spec {
  readonly protocol: number;
  readonly scripts: Record<string, { file: string; command: string; keys: number }>;
  readonly keys: Record<string, string>;
  readonly cases: { name: string; steps: Step[] }[];
  readonly records: { locks: RecordCase<'lock'>[]; artifacts: RecordCase<'artifact'>[] };
  readonly ids: { encode: IdCase[]; decode: { name: string; encoded: string; id: string | null }[] };
}
/** An ID and its encoding in keys, or the problem that refuses it (as a scope). */
type IdCase = { name: string; id: string } & ({ encoded: string } | { problem: string });
/** A stored value (`value` as UTF-8, or `base64` bytes) and what a reader makes of it (`null`: not a record). */
type RecordCase<K extends string> = { name: string; value?: string; base64?: string } & Record<K, Record<string, string> | null>;

const spec = JSON.parse(readFileSync(join(__dirname, 'cases.json'), 'utf8')) as Spec;
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- scripts of every signature, called with the case's arguments
const byCommand = new Map<string, LuaScript<any, unknown>>([...PROTOCOL_SCRIPTS].map((s) => [s.command, s]));

describe('protocol conformance (test/conformance/cases.json, real Redis)', () => {
  let redis: Redis;
  let prefix: string;
  beforeAll(() => {
    redis = connectRedis();
  });
  beforeEach(() => {
    prefix = testPrefix('conf');
  });
  afterEach(() => deletePrefix(redis, prefix));
  afterAll(() => redis.quit());

  it('names the protocol version and every script the guard registers, file and command alike', () => {
    expect(spec.protocol).toBe(PROTOCOL_VERSION);
    for (const [name, s] of Object.entries(spec.scripts)) {
      const script = byCommand.get(s.command);
      expect({ name, registered: script !== undefined }).toEqual({ name, registered: true });
      expect(script?.lua).toBe(readFileSync(join(SCRIPTS_DIR, s.file), 'utf8'));
      expect(script?.numberOfKeys).toBe(s.keys);
    }
    expect(Object.keys(spec.scripts)).toHaveLength(byCommand.size);
  });

  it.each(spec.cases.map((c) => [c.name, c] as const))('%s', async (_name, testCase) => {
    const captured = new Map<string, string>();
    const fill = (text: string): string => {
      let out = text.replace(/\$\{(\w+)\}/g, (_m, name: string) => captured.get(name) ?? `<unset ${name}>`);
      for (const [placeholder, key] of Object.entries(spec.keys)) if (out === placeholder) out = key;
      return out.replace(/\$prefix/g, prefix);
    };
    const arg = (value: string | number) => (typeof value === 'number' ? value : fill(value));
    for (const step of testCase.steps) {
      if (step.redis) {
        const [command, ...rest] = step.redis;
        await redis.call(String(command), ...rest.map(arg));
      } else if (step.script) {
        const script = byCommand.get(spec.scripts[step.script].command)!;
        const reply = await script(redis, (step.keys ?? []).map(fill), (step.args ?? []).map(arg), true).catch((err: Error) => err);
        expectReply(reply, step.expect ?? null, fill, captured);
      } else if (step.state) {
        for (const [placeholder, expected] of Object.entries(step.state)) await expectState(redis, fill(placeholder), expected, fill);
      }
    }
  });
});

describe('protocol records (test/conformance/cases.json, PROTOCOL.md section 4)', () => {
  const bytesOf = (c: { value?: string; base64?: string }) => (c.base64 !== undefined ? Buffer.from(c.base64, 'base64') : Buffer.from(c.value ?? '', 'utf8'));

  // A lock is read as the guard reads acquire's and park's replies: the reply's bytes as a string.
  it.each(spec.records.locks.map((c) => [c.name, c] as const))('lock: %s', (_name, c) => {
    const lock = parseLock(bytesOf(c).toString());
    expect(lock === undefined ? null : { token: lock.token, fencing: String(lock.fencingToken), argsHash: lock.argsHash, holder: lock.holder }).toEqual(c.lock);
  });

  it.each(spec.records.artifacts.map((c) => [c.name, c] as const))('artifact: %s', (_name, c) => {
    const artifact = parseArtifact(bytesOf(c));
    expect(artifact === undefined ? null : { argsHash: artifact.argsHash, payload: artifact.payload.toString('base64') }).toEqual(c.artifact);
  });
});

describe('protocol IDs (test/conformance/cases.json, PROTOCOL.md section 2)', () => {
  const keys = new FireOnceKeys('fire-once');

  it.each(spec.ids.encode.map((c) => [c.name, c] as const))('encode: %s', (_name, c) => {
    let got: { encoded: string } | { problem: string };
    try {
      got = { encoded: encodeId('scope', c.id) };
    } catch (err) {
      got = { problem: (err as Error).message };
    }
    expect(got).toEqual('encoded' in c ? { encoded: c.encoded } : { problem: c.problem });
  });

  // A key reader takes an ID only in the one encoding encodeId writes; anything else is no key of the guard's.
  it.each(spec.ids.decode.map((c) => [c.name, c] as const))('read back from a key: %s', (_name, c) => {
    const read = (key: string) => keys.parse(key)?.scope ?? null;
    expect(read(`fire-once:v3:{default/${c.encoded}}:l:st`)).toEqual(c.id);
  });

  // And decodeId itself, not only through the key's pattern (which refuses an unescaped colon first).
  it.each(spec.ids.decode.map((c) => [c.name, c] as const))('decodeId: %s', (_name, c) => {
    const decoded = (encoded: string) => {
      try {
        return decodeId(encoded);
      } catch (err) {
        if (!(err instanceof FireOnceInvalidId)) throw err;
        return null;
      }
    };
    expect(decoded(c.encoded)).toEqual(c.id);
  });
});

function expectReply(reply: unknown, expected: Json, fill: (s: string) => string, captured: Map<string, string>): void {
  const e = expected as Record<string, Json>;
  if ('error' in e) {
    expect(reply).toBeInstanceOf(Error);
    expect((reply as Error).message).toContain(e.error as string);
    return;
  }
  if (reply instanceof Error) throw reply;
  if ('int' in e) {
    expect(typeof reply).toBe('number');
    const n = reply as number;
    const want = e.int;
    if (typeof want === 'number') expect(n).toBe(want);
    else {
      const range = want as Record<string, Json>;
      if (range.min !== undefined) expect(n).toBeGreaterThanOrEqual(range.min as number);
      if (range.max !== undefined) expect(n).toBeLessThanOrEqual(range.max as number);
      if (range.gt !== undefined) expect(n).toBeGreaterThan(Number(fill(String(range.gt))));
    }
    if (typeof e.capture === 'string') captured.set(e.capture, String(n));
  } else if ('bulk' in e) {
    expect(Buffer.isBuffer(reply) ? reply.toString() : reply).toBe(fill(e.bulk as string));
  } else if ('match' in e) {
    expect(Buffer.isBuffer(reply) ? reply.toString() : String(reply)).toMatch(new RegExp(fill(e.match as string)));
  } else if ('nil' in e) {
    expect(reply).toBeNull();
  } else if ('array' in e) {
    const items = e.array as Json[];
    expect(Array.isArray(reply)).toBe(true);
    expect((reply as unknown[]).length).toBe(items.length);
    items.forEach((item, i) => expectReply((reply as unknown[])[i], item, fill, captured));
  } else {
    throw new Error(`unknown reply description ${JSON.stringify(expected)}`);
  }
}

async function expectState(redis: Redis, key: string, expected: Record<string, Json>, fill: (s: string) => string): Promise<void> {
  const type = await redis.type(key);
  if (expected.type !== undefined) expect({ key, type }).toEqual({ key, type: expected.type });
  if (expected.string !== undefined) expect({ key, value: await redis.get(key) }).toEqual({ key, value: fill(expected.string as string) });
  if (expected.match !== undefined) expect(await redis.get(key)).toMatch(new RegExp(fill(expected.match as string)));
  if (expected.list !== undefined) expect(await redis.lrange(key, 0, -1)).toEqual(expected.list);
  if (expected.stream !== undefined) expect((await redis.xrange(key, '-', '+')).map(([, fields]) => fields)).toEqual(expected.stream);
  if (expected.pttl !== undefined) {
    const [min, max] = expected.pttl as [number, number];
    const pttl = await redis.pttl(key);
    expect(pttl).toBeGreaterThanOrEqual(min);
    expect(pttl).toBeLessThanOrEqual(max);
  }
}
