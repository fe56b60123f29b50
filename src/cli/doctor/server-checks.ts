import { SAFE_EVICTION_POLICY } from '../../core/deployment/eviction';
import { readSetting, type SettingRead } from '../../core/deployment/settings';
import { MIN_REDIS_VERSION, compareVersions } from '../../core/deployment/version';
import type { DoctorNode } from './topology';
import { verdict, type Verdict } from './verdict';

/** The server version against {@link MIN_REDIS_VERSION}. */
export function checkVersion(node: DoctorNode): Verdict {
  const version = node.info.get('redis_version');
  const at = { node: node.address };
  if (version === undefined) return verdict('version', 'unknown', `the server version could not be read (${node.infoError ?? 'no redis_version in INFO'})`, at);
  if (compareVersions(version, MIN_REDIS_VERSION) < 0) {
    return verdict(
      'version',
      'fail',
      `Redis ${version} is older than ${MIN_REDIS_VERSION}, the oldest the library runs on (streams, scripts replicated by their effects)`,
      {
        ...at,
        fix: `upgrade to Redis ${MIN_REDIS_VERSION} or later`,
      },
    );
  }
  return verdict('version', 'ok', `Redis ${version} (the library needs ${MIN_REDIS_VERSION} or later; ACL users and TLS need 6.0)`, at);
}

/** `maxmemory-policy`: only `noeviction` keeps every lock and artifact (they all have TTLs). */
export async function checkEviction(node: DoctorNode): Promise<Verdict> {
  const read = await readSetting(node.client, { info: { section: 'memory', field: 'maxmemory_policy' }, config: 'maxmemory-policy' });
  const at = { node: node.address };
  const fix = `maxmemory-policy ${SAFE_EVICTION_POLICY} (redis.conf, or CONFIG SET maxmemory-policy ${SAFE_EVICTION_POLICY})`;
  if (read.value === undefined) return verdict('eviction', 'unknown', `maxmemory-policy could not be read (${read.reasons.join('; ')})`, at);
  if (read.value !== SAFE_EVICTION_POLICY) {
    return verdict(
      'eviction',
      'fail',
      `maxmemory-policy ${read.value} evicts live locks and artifacts under memory pressure (all of them have a TTL); workers refuse to start`,
      { ...at, fix },
    );
  }
  return verdict('eviction', 'ok', `maxmemory-policy ${SAFE_EVICTION_POLICY}: Redis never evicts a lock or an artifact`, at);
}

/**
 * AOF and its fsync. Without AOF a restart loses every lock written since the last RDB
 * snapshot; `appendfsync everysec` loses the last second or so in a crash of the host (a process
 * crash keeps it: the write is in the OS already); `no` leaves it to the OS.
 */
export async function checkPersistence(node: DoctorNode): Promise<Verdict> {
  const at = { node: node.address };
  const fix = 'appendonly yes and appendfsync always (CONFIG SET appendonly yes; CONFIG SET appendfsync always; CONFIG REWRITE)';
  const aof = fromInfo(node, 'aof_enabled') ?? (await readSetting(node.client, { config: 'appendonly' }));
  if (aof.value === undefined) return verdict('persistence', 'unknown', `whether AOF is on could not be read (${aof.reasons.join('; ')})`, at);
  if (aof.value !== '1' && aof.value !== 'yes') {
    return verdict(
      'persistence',
      'fail',
      'AOF is off: a restart or crash of Redis loses every lock and artifact written since the last RDB snapshot, and their jobs are dispatched again',
      {
        ...at,
        fix,
      },
    );
  }
  if (node.info.get('aof_last_write_status') === 'err') {
    return verdict('persistence', 'fail', 'AOF is on but its last write failed (aof_last_write_status:err): Redis refuses writes until the disk recovers', {
      ...at,
      fix: 'check the disk',
    });
  }
  const fsync = await readSetting(node.client, { config: 'appendfsync' });
  if (fsync.value === undefined) return verdict('persistence', 'unknown', `AOF is on; its fsync policy could not be read (${fsync.reasons.join('; ')})`, at);
  if (fsync.value === 'always') return verdict('persistence', 'ok', 'AOF with appendfsync always: every write is on disk before Redis answers', at);
  const loses = fsync.value === 'everysec' ? 'the last second or two of acknowledged writes' : 'whatever the OS had not written yet';
  return verdict('persistence', 'fail', `AOF with appendfsync ${fsync.value}: a crash of the host loses ${loses}, locks included`, {
    ...at,
    fix: 'appendfsync always',
  });
}

/** A field of the node's INFO as a setting, or undefined when INFO did not report it. */
function fromInfo(node: DoctorNode, field: string): SettingRead | undefined {
  const value = node.info.get(field);
  return value === undefined ? undefined : { value, source: 'INFO' };
}
