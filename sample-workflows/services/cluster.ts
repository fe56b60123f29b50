import { spawnSync } from 'node:child_process';
import { Redis } from 'ioredis';
import { ServiceUnavailableError } from './errors';
import { spawnRedisServerOnFreePort, type SpawnedRedisServer } from './redis';

/** One node's address, as ioredis `new Cluster([...])` takes it. */
export interface ClusterNode {
  readonly host: string;
  readonly port: number;
}

/**
 * PEM files for a cluster that also speaks TLS: the certificate and key every node presents, and
 * the CA that signed them. Absolute paths: each node runs in a directory of its own.
 */
export interface ClusterTlsFiles {
  readonly certFile: string;
  readonly keyFile: string;
  readonly caFile: string;
}

/** A Redis Cluster the caller can use, and how to stop it if we started it. */
export interface RedisClusterService {
  /** The master nodes: startup nodes for `new Cluster(nodes)`. */
  readonly nodes: readonly ClusterNode[];
  /**
   * With the `tls` option: the same masters' TLS ports. Redis answers CLUSTER SLOTS on a TLS
   * connection with TLS ports, so a client seeded here stays on TLS for every node.
   */
  readonly tlsNodes?: readonly ClusterNode[];
  /** True when we spawned the nodes ourselves (no REDIS_CLUSTER_NODES). */
  readonly spawned: boolean;
  stop(): Promise<void>;
}

const HOW_TO_GET_CLUSTER =
  'Install redis-server and redis-cli 7 (Debian/Ubuntu: `apt-get install -y redis-server`; macOS: `brew install redis`), ' +
  'or point REDIS_CLUSTER_NODES at a running cluster (comma-separated host:port, e.g. 127.0.0.1:7000,127.0.0.1:7001).';

/** The cluster's node addresses from `REDIS_CLUSTER_NODES`, or `undefined` when it is unset. */
export function clusterNodesFromEnv(value = process.env.REDIS_CLUSTER_NODES): ClusterNode[] | undefined {
  if (!value) return undefined;
  return value.split(',').map((entry) => {
    const match = /^\s*([^\s:]+|\[[^\]]+\]):(\d+)\s*$/.exec(entry);
    if (!match) throw new ServiceUnavailableError(`REDIS_CLUSTER_NODES entry ${JSON.stringify(entry)} is not host:port`);
    return { host: match[1].replace(/^\[|\]$/g, ''), port: Number(match[2]) };
  });
}

/** `host:port,host:port`, the form `REDIS_CLUSTER_NODES` takes. */
export function formatClusterNodes(nodes: readonly ClusterNode[]): string {
  return nodes.map((n) => `${n.host}:${n.port}`).join(',');
}

/**
 * Use `REDIS_CLUSTER_NODES` when it is set (checked: every node must report `cluster_state:ok`);
 * otherwise spawn `masters` redis-server processes in cluster mode on free ports (own temp dirs,
 * no persistence), join them with `redis-cli --cluster create --cluster-replicas 0`, and wait
 * until every node reports `cluster_state:ok`. `stop()` stops what was spawned. Throws
 * {@link ServiceUnavailableError} saying how to get Redis when neither works.
 *
 * With `own`, the nodes are always spawned: a cluster no other user of REDIS_CLUSTER_NODES sees,
 * for a test that changes a node's settings or counters. With `tls`, they are too
 * (REDIS_CLUSTER_NODES names plaintext nodes): each
 * also listens for TLS on a port of its own and talks TLS on the cluster bus
 * (`tls-cluster yes`); clients are not asked for certificates. The plaintext ports stay, for
 * setting the cluster up.
 */
export async function startRedisCluster(
  options: { readonly masters?: number; readonly tls?: ClusterTlsFiles; readonly own?: boolean } = {},
): Promise<RedisClusterService> {
  const { tls } = options;
  const fromEnv = tls || options.own ? undefined : clusterNodesFromEnv();
  if (fromEnv) {
    await waitForClusterOk(fromEnv, `REDIS_CLUSTER_NODES=${formatClusterNodes(fromEnv)} is not a healthy cluster. ${HOW_TO_GET_CLUSTER}`);
    return { nodes: fromEnv, spawned: false, stop: async () => undefined };
  }
  for (const binary of ['redis-server', 'redis-cli']) {
    if (spawnSync(binary, ['--version']).error) {
      throw new ServiceUnavailableError(`${binary} is not on PATH, and ${fromEnvUnused(options)}. ${HOW_TO_GET_CLUSTER}`);
    }
  }
  const masters = options.masters ?? 3;
  const servers: SpawnedRedisServer[] = [];
  const stop = async () => {
    await Promise.all(servers.map((s) => s.stop()));
  };
  try {
    // One node at a time, each started again on new ports if one of them was taken.
    for (let i = 0; i < masters; i++) servers.push(await spawnRedisServerOnFreePort(nodeArgs(tls), { clusterBus: true, tlsPort: tls !== undefined }));
    const nodes = servers.map((s): ClusterNode => ({ host: '127.0.0.1', port: s.port }));
    const create = spawnSync('redis-cli', ['--cluster', 'create', ...nodes.map((n) => `${n.host}:${n.port}`), '--cluster-replicas', '0', '--cluster-yes'], {
      encoding: 'utf8',
      timeout: 60_000,
    });
    if (create.status !== 0) {
      throw new ServiceUnavailableError(`redis-cli --cluster create failed (exit ${create.status}): ${create.stdout}${create.stderr}`);
    }
    await waitForClusterOk(nodes, `the spawned cluster on ports ${nodes.map((n) => n.port).join(', ')} did not reach cluster_state:ok`);
    const tlsNodes = servers.map((s): ClusterNode => ({ host: '127.0.0.1', port: s.tlsPort ?? s.port }));
    return { nodes, ...(tls ? { tlsNodes } : {}), spawned: true, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}

/** A node's own options, after those of every spawned server (port, bind, dir, cluster bus). */
function nodeArgs(tls: ClusterTlsFiles | undefined): string[] {
  const tlsArgs = tls
    ? ['--tls-cluster', 'yes', '--tls-cert-file', tls.certFile, '--tls-key-file', tls.keyFile, '--tls-ca-cert-file', tls.caFile, '--tls-auth-clients', 'no']
    : [];
  return ['--cluster-node-timeout', '5000', ...tlsArgs];
}

/**
 * Wait until every node reports `cluster_state:ok` and sees all 16384 slots assigned (the gossip
 * that spreads slot ownership takes a moment after `--cluster create`); reject after 30 s.
 */
async function waitForClusterOk(nodes: readonly ClusterNode[], failure: string): Promise<void> {
  const deadline = Date.now() + 30_000;
  let last = '';
  for (;;) {
    const states = await Promise.all(nodes.map((n) => clusterInfo(n).catch((err: Error) => `error: ${err.message}`)));
    if (states.every((s) => /cluster_state:ok/.test(s) && /cluster_slots_assigned:16384/.test(s))) return;
    last = states.map((s, i) => `${nodes[i].port}: ${/cluster_state:\w+/.exec(s)?.[0] ?? s}`).join('; ');
    if (Date.now() > deadline) throw new ServiceUnavailableError(`${failure} (${last})`);
    await sleep(200);
  }
}

async function clusterInfo(node: ClusterNode): Promise<string> {
  const client = connectNode(node);
  try {
    await client.connect();
    return (await client.cluster('INFO')) as string;
  } finally {
    client.disconnect();
  }
}

function connectNode(node: ClusterNode): Redis {
  const client = new Redis({ host: node.host, port: node.port, lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
  client.on('error', () => undefined);
  return client;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Why the nodes are spawned, for the error when they cannot be. */
function fromEnvUnused(options: { readonly tls?: unknown; readonly own?: boolean }): string {
  if (options.tls) return 'a cluster with TLS is always spawned';
  if (options.own) return 'a cluster of its own was asked for';
  return 'REDIS_CLUSTER_NODES is not set';
}
