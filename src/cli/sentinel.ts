import type { Redis } from 'ioredis';
import { parseInfo } from '../core/deployment/settings';
import { CliError, EXIT } from './exit-codes';

/**
 * Refuse a node that is a Redis Sentinel (`redis_mode:sentinel`). A sentinel answers PING and
 * INFO like a data node, but holds no keys and runs no scripts: every command would report it as
 * empty, or as a Redis whose eviction policy and scripting are at fault. The refusal names the
 * masters it monitors, which are what `--redis` should name. A user that may not run INFO is let
 * through: a sentinel has no such users. `shownUrl` is the URL as messages print it (password redacted).
 */
export async function refuseSentinel(client: Redis, shownUrl: string, source: string): Promise<void> {
  let info: string;
  try {
    info = await client.info('server');
  } catch {
    return;
  }
  if (parseInfo(info).get('redis_mode') !== 'sentinel') return;
  const masters = await monitoredMasters(client);
  const instead = masters.length === 0 ? 'it monitors no master' : `point it at the master it monitors (${masters.join(', ')})`;
  throw new CliError(`${source} names a Redis Sentinel (${shownUrl}), which holds no keys: ${instead}`, EXIT.usage);
}

/** `<name> at <ip>:<port>` for each master of `SENTINEL MASTERS`; none if it cannot be read. */
async function monitoredMasters(client: Redis): Promise<string[]> {
  try {
    const reply = (await client.call('SENTINEL', 'MASTERS')) as unknown[];
    return reply.map((entry) => {
      const fields = fieldsOf(entry);
      return `${fields.get('name')} at ${fields.get('ip')}:${fields.get('port')}`;
    });
  } catch {
    return [];
  }
}

/** A flat `[field, value, …]` array (RESP2, or ioredis's legacy mapping of RESP3) or a Map, as a Map. */
function fieldsOf(entry: unknown): Map<string, string> {
  if (entry instanceof Map) return new Map([...entry].map(([k, v]) => [String(k), String(v)]));
  const fields = new Map<string, string>();
  const flat = Array.isArray(entry) ? entry : [];
  for (let i = 0; i + 1 < flat.length; i += 2) fields.set(String(flat[i]), String(flat[i + 1]));
  return fields;
}
