import { setTimeout as sleep } from 'node:timers/promises';
import type { Cluster, Redis } from 'ioredis';
import { isCluster, type RedisClient } from './scripts';

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

/** ioredis's defaults of the Cluster options a `TRYAGAIN` is retried by, if the client sets none. */
const TRY_AGAIN = { retryDelayOnTryAgain: 100, maxRedirections: 16 };

/** How a Cluster client paces a command answered `TRYAGAIN`: the delay before each try, and how many. */
export function tryAgainPace(cluster: Cluster): { readonly delay: number; readonly tries: number } {
  const { retryDelayOnTryAgain = TRY_AGAIN.retryDelayOnTryAgain, maxRedirections = TRY_AGAIN.maxRedirections } = cluster.options;
  return { delay: retryDelayOnTryAgain, tries: maxRedirections };
}

/** ioredis's errors for a command whose connection closed before its reply came. */
const CLOSED = /^(Connection is closed\.|Command aborted due to connection close)$/;

/** The connection a command was sent on closed before its reply: it did not run, or ran once. */
export function isConnectionClosed(err: Error | null | undefined): boolean {
  return err !== null && err !== undefined && CLOSED.test(err.message);
}

/**
 * ioredis gave a command up while its slot moved: after `maxRedirections` replies of a slot on
 * the move (`MOVED`, `ASK`, `TRYAGAIN`: it did not run), or when the connection it waited on
 * closed, as ioredis closes its connection to a master that its refreshed slot map does not list
 * yet (the one a slot migrates to, when it is new to the cluster). A command whose connection
 * closed may have run: every write of the guard compares its token, so a second run changes
 * nothing (a commit that ran reads as refused).
 */
function gaveUpOnMigration(err: unknown): boolean {
  if (!(err instanceof Error)) return false;
  return err.message.startsWith('Too many Cluster redirections. Last error: ') || isConnectionClosed(err);
}

/**
 * Run `send` (one command on `redis`) and, on a Cluster, send it again after the client's
 * `retryDelayOnTryAgain` while ioredis gives it up mid-migration ({@link gaveUpOnMigration}) and
 * another try can start within `boundMs` of the first. A slot whose keys take longer to move than
 * ioredis follows (16 replies, under a second) would otherwise fail a commit whose job has run.
 */
export async function throughMigration<R>(redis: RedisClient, boundMs: number, send: () => Promise<R>): Promise<R> {
  if (!isCluster(redis)) return send();
  const started = performance.now();
  for (;;) {
    try {
      return await send();
    } catch (err) {
      const { delay } = tryAgainPace(redis);
      if (!gaveUpOnMigration(err) || performance.now() - started + delay >= boundMs) throw err;
      await sleep(delay);
    }
  }
}

/** Clients, and their node connections, whose `ASKING` failures are handled. */
const askingHandled = new WeakSet<object>();

/**
 * Handle every `ASKING` that ioredis sends on `cluster`'s node connections. ioredis follows an
 * `ASK` with `ASKING`, then the command, and nobody awaits the `ASKING`: when it fails, its
 * rejection is unhandled, and Node ends the process (a worker's, with every job it runs). It
 * fails when the connection drops first, as ioredis drops a node that its refreshed slot map
 * does not list: mid-migration, the master a slot moves to when it is new to the cluster; or when
 * an ACL denies `ASKING`. The command itself fails on its own promise, where the guard sees it.
 */
export function handleAskingFailures(cluster: Cluster): void {
  if (askingHandled.has(cluster)) return;
  askingHandled.add(cluster);
  const handle = (node: Redis) => {
    if (askingHandled.has(node)) return;
    askingHandled.add(node);
    const target = node as unknown as { asking: (...args: unknown[]) => Promise<unknown> };
    const asking = target.asking.bind(node);
    target.asking = (...args: unknown[]) => {
      const sent = asking(...args);
      sent.catch(() => undefined);
      return sent;
    };
  };
  for (const node of cluster.nodes('all')) handle(node);
  cluster.on('+node', handle);
}
