import type { Redis } from 'ioredis';
import { addressOf } from '../../core/deployment/nodes';
import { parseInfo, replyErrorMessage } from '../../core/deployment/settings';
import { connectNode, connectPeer, type ConnectOptions } from '../connect';

/** One node the doctor talks to: a standalone primary or a Cluster master. */
export interface DoctorNode {
  /** `host:port`. */
  readonly address: string;
  readonly client: Redis;
  /** `INFO` (its default sections), parsed; empty when INFO was refused (see `infoError`). */
  readonly info: ReadonlyMap<string, string>;
  readonly infoError?: string;
}

/** What `CLUSTER INFO` and `CLUSTER SLOTS` said, for a Cluster. */
export interface ClusterView {
  readonly state?: string;
  /** Slots that some master serves, out of 16384. */
  readonly coveredSlots?: number;
  /** Why the slot map could not be read, if it could not. */
  readonly error?: string;
}

/** The deployment behind a URL: its primaries, and the cluster view if it is a Cluster. */
export interface Topology {
  readonly primaries: readonly DoctorNode[];
  readonly cluster: ClusterView | undefined;
  close(): void;
}

/** The number of hash slots of a Redis Cluster. */
export const CLUSTER_SLOTS = 16384;

/**
 * Connect to the node `connection` names and, when it belongs to a Cluster, to every master that
 * serves a slot, each on its own connection (an ioredis `Cluster` would refuse an unhealthy
 * cluster, which is exactly what the doctor must look at).
 */
export async function discover(connection: ConnectOptions): Promise<Topology> {
  const clients: Redis[] = [];
  const close = () => clients.forEach((c) => c.disconnect());
  try {
    const seed = await connectNode(connection);
    clients.push(seed);
    const seedNode = await describeNode(seed, addressOf(seed));
    const isCluster = seedNode.info.get('cluster_enabled') === '1' || (seedNode.infoError !== undefined && (await clusterInfo(seed)) !== undefined);
    if (!isCluster) return { primaries: [seedNode], cluster: undefined, close };

    const info = await clusterInfo(seed);
    const view: { state?: string; coveredSlots?: number; error?: string } = { ...(info?.get('cluster_state') ? { state: info.get('cluster_state') } : {}) };
    let masters: { host: string; port: number }[] = [];
    try {
      const slots = (await seed.call('CLUSTER', 'SLOTS')) as [number, number, [string, number, ...unknown[]], ...unknown[]][];
      view.coveredSlots = slots.reduce((sum, [start, end]) => sum + Number(end) - Number(start) + 1, 0);
      const seen = new Map<string, { host: string; port: number }>();
      for (const [, , [ip, port]] of slots) {
        const host = ip === '' ? (seed.options.host ?? '127.0.0.1') : String(ip);
        seen.set(`${host}:${port}`, { host, port: Number(port) });
      }
      masters = [...seen.values()];
    } catch (err) {
      view.error = `CLUSTER SLOTS: ${replyErrorMessage(err)}`;
    }
    if (masters.length === 0) return { primaries: [seedNode], cluster: view, close };
    const primaries = await Promise.all(
      masters.map(async (m) => {
        const address = `${m.host}:${m.port}`;
        if (address === seedNode.address) return seedNode;
        const client = await connectPeer(seed, m, connection.timeoutMs);
        clients.push(client);
        return describeNode(client, address);
      }),
    );
    return { primaries, cluster: view, close };
  } catch (err) {
    close();
    throw err;
  }
}

async function describeNode(client: Redis, address: string): Promise<DoctorNode> {
  try {
    return { address, client, info: parseInfo(await client.info()) };
  } catch (err) {
    return { address, client, info: new Map(), infoError: `INFO: ${replyErrorMessage(err)}` };
  }
}

async function clusterInfo(client: Redis): Promise<Map<string, string> | undefined> {
  try {
    return parseInfo(String(await client.call('CLUSTER', 'INFO')));
  } catch (err) {
    replyErrorMessage(err);
    return undefined;
  }
}
