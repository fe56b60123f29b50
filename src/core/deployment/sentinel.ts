import type { Redis } from 'ioredis';
import { FireOnceConfigError } from '../errors';
import { isCluster, type RedisClient } from '../scripts';
import { addressOf } from './nodes';
import { parseInfo } from './settings';
import { withinTimeout } from './timeout';

/** A master group a Redis Sentinel monitors. */
export interface MonitoredMaster {
  readonly name: string;
  /** `ip:port`, as the sentinel has it now. */
  readonly address: string;
}

/**
 * The masters `client`'s node monitors, when that node is a Redis Sentinel (`redis_mode:sentinel`);
 * `undefined` when it is a data node, or when INFO is denied (a sentinel has no ACL users that
 * would deny it). A sentinel answers PING and INFO like a data node, but holds no keys and runs no
 * scripts.
 */
export async function sentinelMasters(client: Redis): Promise<MonitoredMaster[] | undefined> {
  let info: string;
  try {
    info = await client.info('server');
  } catch {
    return undefined;
  }
  if (parseInfo(info).get('redis_mode') !== 'sentinel') return undefined;
  try {
    const reply = (await client.call('SENTINEL', 'MASTERS')) as unknown[];
    return reply.map((entry) => {
      const fields = fieldsOf(entry);
      return { name: fields.get('name') ?? '?', address: `${fields.get('ip')}:${fields.get('port')}` };
    });
  } catch {
    return [];
  }
}

/** `<name> at <ip>:<port>, …`. */
export function listMasters(masters: readonly MonitoredMaster[]): string {
  return masters.map((m) => `${m.name} at ${m.address}`).join(', ');
}

/** `it monitors <name> at <ip>:<port>, …`, or that there are none. */
export function describeMasters(masters: readonly MonitoredMaster[]): string {
  return masters.length === 0 ? 'it monitors no master' : `it monitors ${listMasters(masters)}`;
}

/**
 * Refuse a client connected to a sentinel's address instead of through the sentinels: no
 * guard call could run there, and the eviction check would blame the policy it cannot read.
 */
export async function refuseSentinelClient(redis: RedisClient, timeoutMs: number): Promise<void> {
  if (isCluster(redis) || (redis.options.sentinels?.length ?? 0) > 0) return;
  const masters = await withinTimeout(redis, timeoutMs, { what: 'the start checks asked whether it is a Sentinel', noun: "Redis's role" }, () =>
    sentinelMasters(redis),
  );
  if (masters === undefined) return;
  throw new FireOnceConfigError(
    `Redis at ${addressOf(redis)} is a Sentinel, which holds no keys and runs no scripts: give ioredis the sentinels and the master's name ` +
      `(new Redis({ sentinels: [{ host, port }], name: '${masters[0]?.name ?? 'mymaster'}' }), see docs/deployment.md), not a sentinel's address; ${describeMasters(masters)}`,
  );
}

/** A flat `[field, value, …]` array (RESP2, or ioredis's legacy mapping of RESP3) or a Map, as a Map. */
function fieldsOf(entry: unknown): Map<string, string> {
  if (entry instanceof Map) return new Map([...entry].map(([k, v]) => [String(k), String(v)]));
  const fields = new Map<string, string>();
  const flat = Array.isArray(entry) ? entry : [];
  for (let i = 0; i + 1 < flat.length; i += 2) fields.set(String(flat[i]), String(flat[i + 1]));
  return fields;
}
