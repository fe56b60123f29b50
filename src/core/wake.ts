import type { RedisClient } from './scripts';

type Waiter = () => void;

/**
 * One shared subscriber connection per worker, multiplexed over every waiter: waiters of a
 * channel are woken when the holder's commit or release publishes on it. The connection is a
 * `duplicate()` of the caller's client, opened on first use and closed by {@link close}.
 */
export class WakeHub {
  private subscriber: RedisClient | undefined;
  private readonly waiters = new Map<string, Set<Waiter>>();
  private readonly subscribed = new Map<string, Promise<void>>();

  constructor(private readonly redis: RedisClient) {}

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
      ready = this.connection().subscribe(channel).then(() => undefined);
      this.subscribed.set(channel, ready);
      ready.catch(() => this.subscribed.delete(channel));
    }
    await ready;
    return () => this.leave(channel, waiter);
  }

  /** Close the subscriber connection; later joins open a new one. */
  close(): void {
    this.subscriber?.disconnect();
    this.subscriber = undefined;
    this.subscribed.clear();
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
      subscriber.on('message', (channel: string) => {
        for (const wake of this.waiters.get(channel) ?? []) wake();
      });
      this.subscriber = subscriber;
    }
    return this.subscriber;
  }
}
