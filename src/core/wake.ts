import { checkRedisClient } from './options';
import { isCluster, type RedisClient } from './scripts';

type Waiter = (message: string) => void;

/**
 * One shared subscriber connection per worker, multiplexed over every waiter: waiters of a
 * channel are woken when the holder's commit or release publishes on it. The connection is a
 * `duplicate()` of the caller's client, opened on first use and closed by {@link close}.
 *
 * @example
 * ```ts
 * import { FireOnceGuard } from 'temporal-fire-once';
 * import { WakeHub } from 'temporal-fire-once/core';
 * import { Redis } from 'ioredis';
 *
 * export async function onNextCommit(redis: Redis, scope: string, run: () => void): Promise<() => void> {
 *   const keys = new FireOnceGuard({ redis }).keys;
 *   const hub = new WakeHub(redis); // one subscriber connection, shared by every join
 *   return hub.join(keys.wakeChannel(scope), run); // call the result to leave
 * }
 * ```
 */
export class WakeHub {
  private subscriber: RedisClient | undefined;
  private readonly waiters = new Map<string, Set<Waiter>>();
  private readonly subscribed = new Map<string, Promise<void>>();
  private readonly healthListeners: ((healthy: boolean) => void)[] = [];

  constructor(private readonly redis: RedisClient) {
    checkRedisClient(redis, 'WakeHub');
  }

  /**
   * Whether its client is a Redis Cluster's. ioredis re-subscribes a Cluster's subscriber without
   * a 'close' or 'ready', so {@link onHealth} cannot report a gap in which messages were lost.
   */
  get onCluster(): boolean {
    return isCluster(this.redis);
  }

  /**
   * Subscribe to `channel` (shared with other waiters of it). Resolves once the subscription is
   * live, so a publish after that is never missed. Returns the function that unsubscribes.
   */
  async join(channel: string, waiter: Waiter): Promise<() => void> {
    let set = this.waiters.get(channel);
    if (!set) {
      set = new Set();
      this.waiters.set(channel, set);
    }
    set.add(waiter);
    let ready = this.subscribed.get(channel);
    if (!ready) {
      ready = this.connection()
        .subscribe(channel)
        .then(() => undefined);
      this.subscribed.set(channel, ready);
      ready.catch(() => this.subscribed.delete(channel));
    }
    try {
      await ready;
    } catch (err) {
      this.leave(channel, waiter); // a failed join leaves nothing registered behind
      throw err;
    }
    return () => this.leave(channel, waiter);
  }

  /**
   * Follow the subscriber connection's health: `false` when it closes (messages published until
   * it is back are lost), `true` when it is ready again (ioredis re-subscribes on reconnect).
   */
  onHealth(listener: (healthy: boolean) => void): void {
    this.healthListeners.push(listener);
  }

  private emitHealth(healthy: boolean): void {
    for (const listener of this.healthListeners) listener(healthy);
  }

  /** Close the subscriber connection, unhealthy at once; later joins open a new one. */
  close(): void {
    const subscriber = this.subscriber;
    this.subscriber = undefined;
    this.subscribed.clear();
    if (subscriber === undefined) return;
    subscriber.disconnect();
    this.emitHealth(false);
  }

  private leave(channel: string, waiter: Waiter): void {
    const set = this.waiters.get(channel);
    if (!set) return;
    set.delete(waiter);
    if (set.size > 0) return;
    this.waiters.delete(channel);
    this.subscribed.delete(channel);
    this.subscriber?.unsubscribe(channel).catch(() => undefined);
  }

  private connection(): RedisClient {
    if (!this.subscriber) {
      const subscriber = (this.redis as { duplicate(): RedisClient }).duplicate();
      subscriber.on('error', () => undefined); // waiters fall back to polling
      subscriber.on('message', (channel: string, message: string) => {
        for (const wake of this.waiters.get(channel) ?? []) wake(message);
      });
      // Only the current connection's: a replaced one's late close must not switch a new one off.
      subscriber.on('close', () => this.subscriber === subscriber && this.emitHealth(false));
      subscriber.on('ready', () => this.subscriber === subscriber && this.emitHealth(true));
      this.subscriber = subscriber;
    }
    return this.subscriber;
  }
}
