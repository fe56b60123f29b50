import type { Cluster, Redis } from 'ioredis';
import { formatArtifact, parseArtifact, parseLock, type LockRecord } from '../../src/core';

type Client = Redis | Cluster;

/** The lock record at `key`, read as the guard reads it; `undefined` when there is none. */
export async function lockOf(redis: Client, key: string): Promise<LockRecord | undefined> {
  const value = await redis.get(key);
  return value === null ? undefined : parseLock(value);
}

/** The token of the lock at `key`, or `undefined`. */
export async function lockToken(redis: Client, key: string): Promise<string | undefined> {
  return (await lockOf(redis, key))?.token;
}

/** Write a lock record as acquire.lua would, e.g. to stand for another holder's lock. */
export async function writeLock(
  redis: Client,
  key: string,
  token: string,
  record: { readonly fencingToken?: number; readonly argsHash?: string; readonly holder?: string; readonly ttlMs?: number } = {},
): Promise<void> {
  const value = `${token} ${record.fencingToken ?? 1} ${record.argsHash ?? ''} ${record.holder ?? ''}`;
  await redis.set(key, value, 'PX', record.ttlMs ?? 30_000, 'XX');
  if ((await redis.exists(key)) === 0) await redis.set(key, value, 'PX', record.ttlMs ?? 30_000);
}

/** Write an artifact record as commit.lua would. */
export async function writeArtifact(redis: Client, key: string, payload: Buffer, argsHash = '', ttlMs = 60_000): Promise<void> {
  await redis.set(key, formatArtifact(argsHash, payload), 'PX', ttlMs);
}

/** The payload of the artifact record at `key`, or `undefined`. */
export async function storedPayload(redis: Client, key: string): Promise<Buffer | undefined> {
  const value = await redis.getBuffer(key);
  return value === null ? undefined : parseArtifact(value)?.payload;
}
