import { Cluster, Redis, type ClusterOptions } from 'ioredis';
import { clusterNodesFromEnv, type ClusterNode } from '../../../sample-workflows/services';

/** The cluster's nodes (REDIS_CLUSTER_NODES, set by test/cluster/global-setup.ts). */
export function clusterNodes(): ClusterNode[] {
  const nodes = clusterNodesFromEnv();
  if (!nodes) {
    throw new Error('REDIS_CLUSTER_NODES is not set: run these tests with `npm run test:cluster`, whose global setup starts a Redis Cluster');
  }
  return nodes;
}

/** A fresh ioredis Cluster client on the suite's cluster. */
export function connectCluster(options: ClusterOptions = {}): Cluster {
  return new Cluster(clusterNodes(), options);
}

/** A plain connection to one node, e.g. to read INFO or subscribe on that very node. */
export function connectNode(node: { host: string; port: number }): Redis {
  return new Redis({ host: node.host, port: node.port, maxRetriesPerRequest: 1 });
}

/** The master connections of `cluster`, once it has connected and learnt the slot map. */
export async function masters(cluster: Cluster): Promise<Redis[]> {
  if (cluster.status !== 'ready') await cluster.ping();
  const nodes = cluster.nodes('master');
  if (nodes.length === 0) throw new Error('the cluster client knows no master node');
  return nodes;
}

/**
 * Delete every key under `prefix:` on every master: SCAN per node, then one DEL per key, since
 * the keys of one node still span many slots (a multi-key DEL would be refused with CROSSSLOT).
 */
export async function deletePrefixOnCluster(cluster: Cluster, prefix: string): Promise<void> {
  for (const node of await masters(cluster)) {
    let cursor = '0';
    do {
      const [next, keys] = await node.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 1000);
      await Promise.all(keys.map((key) => cluster.del(key)));
      cursor = next;
    } while (cursor !== '0');
  }
}

/** How many errors of `type` (e.g. `CROSSSLOT`) every master has replied since it started. */
export async function errorCount(cluster: Cluster, type: string): Promise<number> {
  let total = 0;
  for (const node of await masters(cluster)) {
    const info = await node.info('errorstats');
    total += Number(new RegExp(`errorstat_${type}:count=(\\d+)`).exec(info)?.[1] ?? 0);
  }
  return total;
}

/** One EVAL or EVALSHA the client sent: the keys it named, and the error it got, if any. */
export interface ScriptCall {
  readonly command: string;
  readonly keys: readonly string[];
  error?: Error;
}

/**
 * Record every script call made through `cluster` (what `defineCommand` scripts send), with the
 * key list it passes, by wrapping the client's `sendCommand`. Returns the growing list.
 */
export function recordScriptCalls(cluster: Cluster): ScriptCall[] {
  const calls: ScriptCall[] = [];
  const send = cluster.sendCommand.bind(cluster);
  cluster.sendCommand = ((command: { name: string; args: unknown[]; promise: Promise<unknown> }, ...rest: unknown[]) => {
    if (command.name === 'evalsha' || command.name === 'eval') {
      const numberOfKeys = Number(command.args[1]);
      const call: ScriptCall = { command: command.name, keys: command.args.slice(2, 2 + numberOfKeys).map(String) };
      calls.push(call);
      command.promise.catch((err: Error) => {
        call.error = err;
      });
    }
    return (send as (...args: unknown[]) => unknown)(command, ...rest);
  }) as typeof cluster.sendCommand;
  return calls;
}

/**
 * The cluster slot of `key`, computed locally the way Redis does (CRC16/XMODEM of the hash tag,
 * or of the whole key when it has none, mod 16384), to find many keys of one slot quickly.
 */
export function keySlot(key: string): number {
  const bytes = Buffer.from(key);
  const open = bytes.indexOf('{');
  const close = open === -1 ? -1 : bytes.indexOf('}', open + 1);
  const hashed = close > open + 1 ? bytes.subarray(open + 1, close) : bytes;
  let crc = 0;
  for (const byte of hashed) {
    crc ^= byte << 8;
    for (let bit = 0; bit < 8; bit++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
  }
  return crc % 16384;
}
