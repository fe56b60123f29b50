import type { Info } from '@temporalio/activity';
import { ApplicationFailure, RawValue, defaultPayloadConverter, type LogLevel, type LogMetadata, type Logger } from '@temporalio/common';
import { MockActivityEnvironment } from '@temporalio/testing';
import type { Redis } from 'ioredis';
import { type FireOnceGuard } from '../../src';
import { createFireOnceActivityInterceptor, fireOnceActivityMap, type FireOnceInterceptorConfig } from '../../src/core';
import { payloadToBytes } from '../../src/worker/artifact';
import { useGuardFixture, type GuardFixture } from './redis';

/** Another scope's finished work: its artifact must survive every bad input byte for byte. */
export const BYSTANDER = { scope: 'bystander', step: 'report', jobType: 'report' } as const;

/** Commit a real artifact for {@link BYSTANDER} through the guard, as a finished dispatch would. */
export async function seedBystander(guard: FireOnceGuard): Promise<void> {
  const outcome = await guard.acquire(BYSTANDER);
  if (outcome.kind !== 'acquired') throw new Error(`bystander: expected to acquire, got ${outcome.kind}`);
  await guard.commit(outcome.lease, payloadToBytes(defaultPayloadConverter.toPayload({ report: 'bystander', total: 42 })));
}

/** Every key under `prefix:` and its DUMP (the value's exact serialisation). */
export type KeySnapshot = ReadonlyMap<string, Buffer>;

/** Every key matching `pattern`, sorted (SCAN, never KEYS). */
export async function scanKeys(redis: Redis, pattern: string): Promise<string[]> {
  const keys: string[] = [];
  let cursor = '0';
  do {
    const [next, batch] = await redis.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
    keys.push(...batch);
    cursor = next;
  } while (cursor !== '0');
  return keys.sort();
}

export async function snapshot(redis: Redis, prefix: string): Promise<KeySnapshot> {
  const keys = await scanKeys(redis, `${prefix}:*`);
  const dumps = new Map<string, Buffer>();
  for (const key of keys) {
    const dump = await redis.dumpBuffer(key);
    if (dump) dumps.set(key, dump);
  }
  if (dumps.size === 0) throw new Error(`nothing to snapshot under ${prefix}: seed the bystander first`);
  return dumps;
}

/**
 * Every key of the snapshot still exists with a TTL and the byte-identical value. Returns a list
 * of differences (empty when intact), so a test can both assert and report.
 */
export async function differences(redis: Redis, before: KeySnapshot): Promise<string[]> {
  const diffs: string[] = [];
  for (const [key, dump] of before) {
    const now = await redis.dumpBuffer(key);
    if (now === null) diffs.push(`${key}: gone`);
    else if (Buffer.compare(now, dump) !== 0) diffs.push(`${key}: changed`);
    else if ((await redis.pttl(key)) <= 0) diffs.push(`${key}: lost its TTL`);
  }
  return diffs;
}

/** A counter the guard does not own: the activity body INCRs it, on the suite's Redis. */
export function dispatchCounter(redis: Redis, prefix: string) {
  const key = `${prefix}:dispatches`;
  return {
    key,
    /** Count one dispatch of `label` (default: all). */
    hit: (label = 'all') => redis.hincrby(key, label, 1),
    count: async (label = 'all') => Number((await redis.hget(key, label)) ?? 0),
    total: async () => (await redis.hvals(key)).reduce((sum, v) => sum + Number(v), 0),
  };
}

/** Every log call, as the activity's logger received it. */
export interface LogEntry {
  readonly level: LogLevel;
  readonly message: string;
  readonly meta?: LogMetadata;
}

/** A Temporal Logger that keeps everything, at every level. */
export class CapturingLogger implements Logger {
  readonly entries: LogEntry[] = [];
  log(level: LogLevel, message: string, meta?: LogMetadata): void {
    this.entries.push({ level, message, ...(meta === undefined ? {} : { meta }) });
  }
  trace(message: string, meta?: LogMetadata): void {
    this.log('TRACE', message, meta);
  }
  debug(message: string, meta?: LogMetadata): void {
    this.log('DEBUG', message, meta);
  }
  info(message: string, meta?: LogMetadata): void {
    this.log('INFO', message, meta);
  }
  warn(message: string, meta?: LogMetadata): void {
    this.log('WARN', message, meta);
  }
  error(message: string, meta?: LogMetadata): void {
    this.log('ERROR', message, meta);
  }
  /** Everything logged, as one string to search. */
  text(): string {
    return this.entries.map((e) => `${e.level} ${e.message} ${JSON.stringify(e.meta ?? {}, jsonSafe)}`).join('\n');
  }
}

/** JSON.stringify replacer for values JSON cannot hold (BigInt, Buffers shown as hex). */
export function jsonSafe(_key: string, value: unknown): unknown {
  if (typeof value === 'bigint') return `${value}n`;
  return value;
}

/** Run one guarded activity through the real interceptor, as a worker would; logs go to `logger` (kept quiet by default). */
export function runActivity(options: {
  readonly config: Omit<FireOnceInterceptorConfig, 'activities'>;
  readonly activities: Record<string, (...args: never[]) => Promise<unknown>>;
  readonly activityType: string;
  readonly args?: readonly unknown[];
  readonly info?: Partial<Info>;
  readonly logger?: Logger;
}): Promise<unknown> {
  const { config, activities, activityType, args = [], info = {}, logger = new CapturingLogger() } = options;
  const factory = createFireOnceActivityInterceptor({ pollIntervalMs: 20, ...config, activities: fireOnceActivityMap(activities) });
  const env = new MockActivityEnvironment(
    { namespace: 'default', activityType, startToCloseTimeoutMs: 10_000, currentAttemptScheduledTimestampMs: Date.now(), ...info },
    { interceptors: [factory], logger },
  );
  return env.run(activities[activityType] as (...a: unknown[]) => Promise<unknown>, ...args);
}

/** The settled outcome of a promise: its value or its error, never a rejection. */
export async function settle(promise: Promise<unknown>): Promise<{ readonly value?: unknown; readonly error?: unknown }> {
  try {
    return { value: await promise };
  } catch (error) {
    return { error };
  }
}

/** The error as the ApplicationFailure a guarded activity ends with; fails the test otherwise. */
export function asFailure(error: unknown): ApplicationFailure {
  if (!(error instanceof ApplicationFailure)) {
    throw new Error(`expected an ApplicationFailure, got ${error instanceof Error ? `${error.name}: ${error.message}` : String(error)}`);
  }
  return error;
}

/** The result a guarded activity returns: a RawValue of the stored or fresh payload, decoded. */
export function decoded(value: unknown): unknown {
  if (!(value instanceof RawValue)) throw new Error(`expected a RawValue result, got ${String(value)}`);
  return defaultPayloadConverter.fromPayload(value.payload);
}

/** Per test: the guard fixture, a dispatch counter, a bystander artifact and its snapshot. */
export interface BadInputFixture extends GuardFixture {
  counter: ReturnType<typeof dispatchCounter>;
  before: KeySnapshot;
}

/** The hooks every bad-input file shares: {@link useGuardFixture}, then seed and snapshot. */
export function useBadInputFixture(name: string): BadInputFixture {
  const fx = useGuardFixture(name, { lockTtlMs: 60_000 }) as BadInputFixture;
  beforeEach(async () => {
    fx.counter = dispatchCounter(fx.redis, fx.prefix);
    await seedBystander(fx.guard);
    fx.before = await snapshot(fx.redis, fx.prefix);
  });
  return fx;
}
