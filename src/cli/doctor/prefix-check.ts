import { DEFAULT_NAMESPACE, FireOnceKeys, KEY_PREFIX_PATTERN, PROTOCOL_VERSION, decodeId } from '../../core/keys';
import { replyErrorMessage } from '../../core/deployment/settings';
import { redactUrl } from '../connect';
import { fireOnceCommand } from '../shell';
import type { DoctorNode } from './topology';
import { verdict, type Verdict } from './verdict';

/**
 * A key of 0.1's layout (protocol v2) that `migrate` acts on: `<prefix>:{<scope>}:lock|artifact|fence:<id>`,
 * with the Redis type 0.1 wrote it as (`external:` keys are the jobs' own, and `migrate` leaves them).
 */
const LEGACY_KEY = /^(.+?):\{[^{}]+\}:(lock|artifact|fence):[^:]+$/;
const LEGACY_TYPE: Record<string, string> = { lock: 'hash', artifact: 'hash', fence: 'string' };

/** How many keys `doctor` looks at, across all primaries, unless `--scan-budget` says otherwise. */
export const DEFAULT_SCAN_BUDGET = 10_000;

/** A namespace's dispatch log: `<prefix>:v3:<ns>:log` (an encoded ID holds no `:`, `/`, `{` or `}`). */
const LOG_KEY = new RegExp(`^(.+):v${PROTOCOL_VERSION}:([^:/{}]+):log$`);

/**
 * The guard prefix and namespace of `key`, if it is a guard's: a scope key
 * (`<prefix>:v3:{<ns>/<scope>}:…`, the prefix everything before its hash tag) or a namespace's
 * dispatch log, which outlives a prefix's expired locks and artifacts. `namespace` is `undefined`
 * when its ID does not decode.
 */
export function guardKeyOf(key: string): { prefix: string; namespace: string | undefined } | undefined {
  const log = LOG_KEY.exec(key);
  if (log !== null) return KEY_PREFIX_PATTERN.test(log[1]) ? { prefix: log[1], namespace: decoded(log[2]) } : undefined;
  const tag = key.indexOf(`:v${PROTOCOL_VERSION}:{`);
  if (tag <= 0 || key.indexOf('}', tag) === -1) return undefined;
  const prefix = key.slice(0, tag);
  if (!KEY_PREFIX_PATTERN.test(prefix)) return undefined;
  return { prefix, namespace: new FireOnceKeys(prefix).parse(key)?.namespace }; // the first part of its hash tag
}

function decoded(id: string): string | undefined {
  try {
    return decodeId(id);
  } catch {
    return undefined;
  }
}

/**
 * SCAN the primaries, at most `budget` keys in all (SCAN's COUNT is a hint: a reply past the budget
 * is cut there), and list the guard prefixes found ({@link guardKeyOf}), each with
 * how many keys it has and in which namespaces. Informational: `warn` only when the workers'
 * `--prefix` has no key at all, or when the keyspace cannot be scanned. Keys of 0.1 get the
 * `migrate` command to run for each prefix, with `redisArg` (doctor's `--redis`, if given).
 */
export async function checkPrefixes(primaries: readonly DoctorNode[], expected: string, budget: number, redisArg?: string, url?: string): Promise<Verdict> {
  const counts = new Map<string, { keys: number; namespaces: Set<string> }>();
  const legacy = new Set<string>();
  let scanned = 0;
  let total = 0;
  try {
    for (const { client } of primaries) {
      total += await client.dbsize();
      let cursor = '0';
      do {
        if (scanned >= budget) break;
        const [next, reply] = await client.scan(cursor, 'COUNT', Math.min(1000, budget - scanned));
        const keys = reply.slice(0, budget - scanned);
        scanned += keys.length;
        for (const key of keys) {
          const old = LEGACY_KEY.exec(key);
          if (old !== null && KEY_PREFIX_PATTERN.test(old[1]) && !legacy.has(old[1]) && (await client.type(key)) === LEGACY_TYPE[old[2]]) legacy.add(old[1]);
          const guardKey = guardKeyOf(key);
          if (guardKey === undefined) continue;
          const entry = counts.get(guardKey.prefix) ?? { keys: 0, namespaces: new Set<string>() };
          entry.keys++;
          if (guardKey.namespace !== undefined) entry.namespaces.add(guardKey.namespace);
          counts.set(guardKey.prefix, entry);
        }
        cursor = next;
      } while (cursor !== '0');
    }
  } catch (err) {
    return verdict('prefixes', 'warn', `the keyspace could not be scanned (${replyErrorMessage(err)}); run doctor as a user that may SCAN to list prefixes`);
  }
  const coverage = scanned >= total ? `all ${total} keys scanned` : `${scanned} of ${total} keys scanned (--scan-budget)`;
  const found = [...counts.entries()]
    .sort((a, b) => b[1].keys - a[1].keys)
    .map(([prefix, { keys, namespaces }]) => `${prefix} (${keys} keys${namespaces.size > 0 ? `; namespaces ${[...namespaces].sort().join(', ')}` : ''})`);
  const warnings: string[] = [];
  const fixes: string[] = [];
  if (legacy.size > 0) {
    warnings.push(
      `keys of 0.1 (protocol v2) under ${[...legacy].sort().join(', ')}, which 0.2 never reads${found.length > 0 ? `; guard prefixes: ${found.join(', ')}` : ''}`,
    );
    fixes.push(
      `stop the 0.1 workers, then run ${[...legacy]
        .sort()
        .map(
          (prefix) =>
            `npx ${fireOnceCommand('migrate', undefined, [], { ...(redisArg === undefined ? {} : { redis: redisArg }), prefix, namespace: DEFAULT_NAMESPACE })}`,
        )
        .join('; ')} (docs/upgrading.md)`,
    );
  }
  // A prefix with keys of 0.1 only has none of this layout until it is migrated.
  if (!counts.has(expected) && !legacy.has(expected)) {
    warnings.push(`no key under --prefix ${expected} in ${coverage}${found.length > 0 && legacy.size === 0 ? `; found ${found.join(', ')}` : ''}`);
    fixes.push(`pass the keyPrefix the workers use as --prefix (it also scopes the ACL check)${otherDatabases(primaries, url)}`);
  }
  if (warnings.length > 0) return verdict('prefixes', 'warn', warnings.join('; and '), { fix: fixes.join('; and ') });
  return verdict('prefixes', 'ok', `${coverage}; guard prefixes: ${found.join(', ')}`);
}

/**
 * The other databases of a standalone Redis that hold keys (`INFO keyspace`), each with the URL
 * that reaches it: SCAN sees one database, so workers keyed in db 3 look like no workers at all.
 */
function otherDatabases(primaries: readonly DoctorNode[], url: string | undefined): string {
  if (primaries.length !== 1 || url === undefined) return '';
  const { client, info } = primaries[0];
  const own = `db${client.options.db ?? 0}`;
  const others = [...info].flatMap(([name, value]) => {
    const keys = /^db(\d+)$/.test(name) && name !== own ? /(?:^|,)keys=(\d+)/.exec(value)?.[1] : undefined;
    if (keys === undefined) return [];
    const there = new URL(url);
    there.pathname = `/${name.slice(2)}`;
    return [`; database ${name.slice(2)} holds ${keys} key(s): if the workers use it, give it in --redis (${redactUrl(there.toString())})`];
  });
  return others.join('');
}
