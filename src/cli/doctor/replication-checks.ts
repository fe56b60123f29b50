import { readSetting } from '../../core/deployment/settings';
import type { DoctorNode } from './topology';
import { verdict, type Verdict } from './verdict';

/**
 * A replica acknowledges its offset every second, so a healthy one shows `lag` 0 or 1 in
 * `INFO replication`; more than this many seconds means it is falling behind or stuck.
 */
const REPLICA_LAG_LIMIT_S = 2;

/** One replica as its primary reports it (`slaveN:ip=…,port=…,state=…,offset=…,lag=…`). */
interface ReplicaState {
  readonly address: string;
  readonly state: string;
  /** Bytes of the replication stream it has not acknowledged. */
  readonly behindBytes: number;
  /** Seconds since its last acknowledgement. */
  readonly lagS: number;
}

/** The replicas listed in a primary's INFO. */
function replicasOf(node: DoctorNode): ReplicaState[] {
  const masterOffset = Number(node.info.get('master_repl_offset') ?? 0);
  const replicas: ReplicaState[] = [];
  for (const [field, value] of node.info) {
    if (!/^slave\d+$/.test(field)) continue;
    const f = Object.fromEntries(value.split(',').map((kv) => kv.split('=') as [string, string]));
    replicas.push({
      address: `${f.ip}:${f.port}`,
      state: f.state ?? 'unknown',
      behindBytes: Math.max(0, masterOffset - Number(f.offset ?? 0)),
      lagS: Number(f.lag ?? 0),
    });
  }
  return replicas;
}

/** The node's role, its replicas' health, whether writes wait for them, and min-replicas-to-write. */
export async function checkReplication(node: DoctorNode): Promise<Verdict[]> {
  const at = { node: node.address };
  const role = node.info.get('role');
  if (role === undefined) return [verdict('replicas', 'unknown', `replication could not be read (${node.infoError ?? 'no role in INFO'})`, at)];
  if (role !== 'master') {
    const master = `${node.info.get('master_host')}:${node.info.get('master_port')}`;
    return [
      verdict('role', 'fail', `this node is a replica of ${master}: a worker pointed here gets READONLY on every write`, {
        ...at,
        fix: 'point the workers at the primary or at Sentinel, and --redis at the primary',
      }),
    ];
  }
  const replicas = replicasOf(node);
  return [replicaHealth(node, replicas), ...(replicas.length > 0 ? [replicaSync(node)] : []), await minReplicas(node, replicas)];
}

function replicaHealth(node: DoctorNode, replicas: readonly ReplicaState[]): Verdict {
  const at = { node: node.address };
  if (replicas.length === 0) return verdict('replicas', 'ok', 'no replicas: nothing to fail over to, so persistence alone keeps the locks', at);
  const described = replicas.map((r) => `${r.address} ${r.state}, lag ${r.lagS} s, ${r.behindBytes} bytes behind`).join('; ');
  const unwell = replicas.filter((r) => r.state !== 'online' || r.lagS > REPLICA_LAG_LIMIT_S);
  if (unwell.length > 0) {
    return verdict(
      'replicas',
      'fail',
      `${unwell.length} of ${replicas.length} replica(s) not online or lagging more than ${REPLICA_LAG_LIMIT_S} s (${described}): a failover to one loses the locks it has not received`,
      {
        ...at,
        fix: 'find why the replica lags (network, load, a full output buffer) before relying on a failover',
      },
    );
  }
  return verdict('replicas', 'ok', `${replicas.length} replica(s) online (${described})`, at);
}

function replicaSync(node: DoctorNode): Verdict {
  const at = { node: node.address };
  return verdict(
    'replica-sync',
    'ok',
    "workers wait for every attached replica to acknowledge each lock before dispatching (replicaSync 'auto', the default); a worker with replicaSync: false does not, and a failover can lose its newest locks",
    at,
  );
}

async function minReplicas(node: DoctorNode, replicas: readonly ReplicaState[]): Promise<Verdict> {
  const at = { node: node.address };
  const good = node.info.get('min_slaves_good_slaves'); // only in INFO when min-replicas-to-write is set
  const read = await readSetting(node.client, { config: 'min-replicas-to-write' });
  const setting = read.value !== undefined ? Number(read.value) : good !== undefined ? 1 : undefined;
  const fix = 'min-replicas-to-write 1 and min-replicas-max-lag 10';
  if (replicas.length === 0) {
    if (setting !== undefined && setting > 0) {
      return verdict(
        'min-replicas',
        'warn',
        `min-replicas-to-write ${setting} with no replica: the primary refuses every write (NOREPLICAS) and the guard fails closed`,
        at,
      );
    }
    return verdict('min-replicas', 'ok', 'min-replicas-to-write is not needed without replicas', at);
  }
  if (setting === undefined)
    return verdict('min-replicas', 'unknown', `min-replicas-to-write could not be read (${read.value === undefined ? read.reasons.join('; ') : ''})`, at);
  if (setting === 0) {
    return verdict(
      'min-replicas',
      'warn',
      'min-replicas-to-write is 0: a primary cut off from its replicas keeps taking writes; workers with replicaSync (the default) refuse to dispatch on them, workers with replicaSync: false do not',
      { ...at, fix },
    );
  }
  if (good !== undefined && Number(good) < setting) {
    return verdict(
      'min-replicas',
      'warn',
      `min-replicas-to-write ${setting} but only ${good} replica(s) in time: the primary refuses writes now (NOREPLICAS) and the guard fails closed`,
      at,
    );
  }
  return verdict('min-replicas', 'ok', `min-replicas-to-write ${setting}: a primary cut off from its replicas stops taking writes`, at);
}
