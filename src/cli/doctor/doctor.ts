import { MIN_REDIS_VERSION } from '../../core/deployment/version';
import { FireOnceKeys } from '../../core/keys';
import { redactUrl, type ConnectOptions } from '../connect';
import type { ExitCode } from '../exit-codes';
import { checkAcl } from './acl-check';
import { checkCluster } from './cluster-check';
import { checkPrefixes } from './prefix-check';
import { checkReplication } from './replication-checks';
import { checkScripts } from './script-check';
import { checkEviction, checkPersistence, checkVersion } from './server-checks';
import { discover } from './topology';
import { countStatuses, exitCodeOf, type Status, type Verdict } from './verdict';

/** What `doctor` is told beyond the connection. */
export interface DoctorOptions {
  /** The workers' keyPrefix: scopes the ACL check and the prefix listing. */
  readonly prefix: string;
  /** The namespace whose keys, channels and dispatch log the ACL check probes; `default` if unset. */
  readonly namespace?: string;
  /** At most this many keys are scanned for prefixes. */
  readonly scanBudget: number;
  /** Check this user's permissions with ACL DRYRUN instead of the connected user's. */
  readonly aclUser?: string;
  /** `--redis` as given (not from `REDIS_URL`): the commands doctor prints to paste carry it. */
  readonly redisArg?: string;
}

/** Everything `doctor` found; `--json` prints this. */
export interface DoctorReport {
  /** The URL, password redacted. */
  readonly redis: string;
  readonly topology: 'standalone' | 'cluster';
  readonly primaries: readonly string[];
  /** The oldest Redis the library runs on. */
  readonly minimumVersion: string;
  readonly verdicts: readonly Verdict[];
  readonly counts: Record<Status, number>;
  /** 0: nothing at risk; 1: something is; 7: nothing found at risk, but some checks could not be made. */
  readonly exitCode: ExitCode;
}

/**
 * Check the deployment behind `connection`: for every primary (or Cluster master) its version,
 * eviction policy, persistence, replication and min-replicas-to-write, script support and ACL
 * permissions; then the Cluster's slot coverage and the key prefixes in use. Reads only: no
 * command it sends writes (the ACL check asks the server without running anything).
 */
export async function runDoctor(connection: ConnectOptions, options: DoctorOptions): Promise<DoctorReport> {
  const topology = await discover(connection);
  try {
    const verdicts: Verdict[] = [];
    for (const node of topology.primaries) {
      verdicts.push(checkVersion(node), await checkEviction(node), await checkPersistence(node));
      verdicts.push(...(await checkReplication(node)));
      verdicts.push(await checkScripts(node), ...(await checkAcl(node, new FireOnceKeys(options.prefix, options.namespace), options.aclUser)));
    }
    verdicts.push(checkCluster(topology), await checkPrefixes(topology.primaries, options.prefix, options.scanBudget, options.redisArg, connection.url));
    return {
      redis: redactUrl(connection.url),
      topology: topology.cluster === undefined ? 'standalone' : 'cluster',
      primaries: topology.primaries.map((p) => p.address),
      minimumVersion: MIN_REDIS_VERSION,
      verdicts,
      counts: countStatuses(verdicts),
      exitCode: exitCodeOf(verdicts),
    };
  } finally {
    topology.close();
  }
}
