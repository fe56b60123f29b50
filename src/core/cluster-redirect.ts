import type { Cluster, Redis } from 'ioredis';

/** A Cluster node's `MOVED` or `ASK` reply: the command did not run, and where to send it instead. */
export interface Redirect {
  readonly kind: 'MOVED' | 'ASK';
  /** `host:port` as the node announced it (before the client's `natMap`). */
  readonly address: string;
}

/** The redirect `err` is, if it is one: a `MOVED <slot> <host:port>` or `ASK <slot> <host:port>` reply. */
export function redirectOf(err: Error | null | undefined): Redirect | undefined {
  const match = err ? /^(MOVED|ASK) \d+ (\S+)$/.exec(err.message) : null;
  return match ? { kind: match[1] as Redirect['kind'], address: match[2] } : undefined;
}

/**
 * The Cluster client's own connection to the node at `address` (mapped through its `natMap`, as
 * ioredis maps a redirect), or `undefined` when the client does not know that node yet. Commands
 * sent on it go to that node alone: a redirect comes back as an error, never followed.
 */
export function connectionTo(cluster: Cluster, address: string): Redis | undefined {
  const { natMap } = cluster.options;
  const mapped = typeof natMap === 'function' ? natMap(address) : natMap?.[address];
  const wanted = mapped ? `${mapped.host}:${mapped.port}` : address;
  return cluster.nodes('all').find(({ options }) => `${options.host}:${options.port}` === wanted);
}
