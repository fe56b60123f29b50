import { LRUCache } from 'lru-cache';
import { FireOnceConfigError } from './errors';
import { checkKnownKeys, duration, positiveInteger, resolveSpecs, type OptionSpecs } from './options';
import type { WakeHub } from './wake';

/** Bounds of the in-worker artifact cache. */
export interface ArtifactCacheOptions {
  /**
   * Most artifacts kept.
   * @defaultValue `10_000`
   */
  readonly maxEntries?: number;
  /**
   * Most bytes kept (stored artifact bytes).
   * @defaultValue `67_108_864` (64 MiB)
   */
  readonly maxBytes?: number;
  /**
   * Longest an entry is served without asking Redis, whatever the artifact's TTL left.
   * @defaultValue `60_000`
   */
  readonly maxAgeMs?: number;
}

/**
 * The cache's defaults.
 *
 * @example
 * ```ts
 * import { ARTIFACT_CACHE_DEFAULTS } from 'temporal-fire-once/core';
 * ARTIFACT_CACHE_DEFAULTS.maxAgeMs; // 60000
 * ```
 */
export const ARTIFACT_CACHE_DEFAULTS = Object.freeze({ maxEntries: 10_000, maxBytes: 64 * 1024 * 1024, maxAgeMs: 60_000 } as const);

/** Each bound of the cache, with its default and its check: the plugin's `localCache` and the constructor resolve them alike. */
export const ARTIFACT_CACHE_OPTIONS = {
  maxEntries: { default: ARTIFACT_CACHE_DEFAULTS.maxEntries, check: positiveInteger('entries', 10_000_000) },
  maxBytes: { default: ARTIFACT_CACHE_DEFAULTS.maxBytes, check: positiveInteger('bytes', 16 * 1024 * 1024 * 1024) },
  maxAgeMs: duration(ARTIFACT_CACHE_DEFAULTS.maxAgeMs),
} as const satisfies OptionSpecs;

interface Entry {
  readonly bytes: Buffer;
  readonly argsHash: string;
}

/**
 * An in-worker LRU of committed artifacts, bounded by entries and bytes, so that a hot repeat
 * costs no Redis round trip. An entry never outlives the artifact's TTL in Redis (it is stored
 * with the TTL left when read), nor `maxAgeMs`. Invalidations published by
 * `FireOnceGuard.invalidate` evict it on every worker; while the subscription that carries them
 * is down, the cache is emptied and serves nothing.
 *
 * @example
 * ```ts
 * import { ARTIFACT_CACHE_DEFAULTS, ArtifactCache, WakeHub } from 'temporal-fire-once/core';
 * import { FireOnceGuard } from 'temporal-fire-once';
 * import { Redis } from 'ioredis';
 *
 * export async function cacheFor(redis: Redis): Promise<ArtifactCache> {
 *   const cache = new ArtifactCache({ ...ARTIFACT_CACHE_DEFAULTS, maxBytes: 8 * 1024 * 1024 });
 *   await cache.attach(new WakeHub(redis), [new FireOnceGuard({ redis }).keys.invalidations()]);
 *   return cache;
 * }
 * ```
 */
export class ArtifactCache {
  private readonly lru: LRUCache<string, Entry>;
  private live = false;
  /** Hubs whose health this cache follows: once each, however often it is attached. */
  private readonly followed = new WeakSet<WakeHub>();
  /** The invalidation channels attached so far: the cache may keep only the keys of their namespaces ({@link follows}). */
  private readonly channels = new Set<string>();
  /** Invalidations received so far (see {@link mark}). */
  private invalidations = 0;
  /** One callback for every channel and every attach, so that attaching again adds nothing. */
  private readonly drop = (key: string): void => {
    this.invalidations++;
    this.lru.delete(key);
  };

  readonly options: Required<ArtifactCacheOptions>;

  /**
   * Throws `FireOnceConfigError` for a bound that is no positive integer, or of another name: a
   * `maxAgeMs` of 0 would make the LRU keep entries past their artifact's TTL (0 is "no TTL" to
   * it), and `NaN` fail in the LRU untyped.
   */
  constructor(options: Required<ArtifactCacheOptions>) {
    checkKnownKeys('ArtifactCache', options, Object.keys(ARTIFACT_CACHE_OPTIONS));
    const bounds = resolveSpecs(ARTIFACT_CACHE_OPTIONS, options as Record<string, unknown>, 'ArtifactCache: ');
    this.options = bounds;
    this.lru = new LRUCache<string, Entry>({
      max: bounds.maxEntries,
      maxSize: bounds.maxBytes,
      sizeCalculation: (entry) => entry.bytes.length + 1,
      ttl: bounds.maxAgeMs,
    });
  }

  /**
   * Subscribe to the invalidation channels; the cache serves only while that subscription is live.
   * Attaching again, with more channels (a worker of another namespace) or after the hub was
   * closed and reopened (a worker restarted), subscribes what is not yet subscribed. Refuses a hub
   * on a Redis Cluster client with `FireOnceConfigError`, as the plugin refuses `localCache` there:
   * the cache could not tell when invalidations were lost, and would serve a deleted artifact.
   */
  async attach(hub: WakeHub, channels: readonly string[]): Promise<void> {
    if (hub.onCluster) {
      throw new FireOnceConfigError(
        'ArtifactCache.attach: a local cache is not supported with a Redis Cluster client: it could not tell when invalidations were lost',
      );
    }
    if (!this.followed.has(hub)) {
      this.followed.add(hub);
      hub.onHealth((healthy) => {
        if (!healthy) this.lru.clear();
        this.live = healthy;
      });
    }
    await Promise.all(channels.map((channel) => hub.join(channel, this.drop)));
    for (const channel of channels) this.channels.add(channel);
    this.live = true;
  }

  /**
   * Whether `channel` was attached: the artifacts of a namespace whose invalidation channel it is
   * not must not be kept, for their invalidations never reach this cache.
   */
  follows(channel: string): boolean {
    return this.channels.has(channel);
  }

  /** The cached bytes of `key`, unless absent, expired, detached, or stored for other arguments. */
  get(key: string, argsHash: string): Buffer | undefined {
    if (!this.live) return undefined;
    const entry = this.lru.get(key);
    if (entry === undefined || entry.argsHash !== argsHash) return undefined;
    return entry.bytes;
  }

  /**
   * A mark to take before the Redis call whose reply {@link set} will keep. An invalidation that
   * arrives while the call is in flight may have deleted the very artifact the reply carries, so a
   * `set` given an older mark keeps nothing: any invalidation since counts, whatever its key.
   */
  mark(): number {
    return this.invalidations;
  }

  /** Keep `bytes` for at most `ttlMs` (the artifact's TTL left) and `maxAgeMs`, unless an invalidation arrived since `mark`. */
  set(key: string, bytes: Buffer, argsHash: string, ttlMs: number, mark?: number): void {
    if (!this.live || ttlMs <= 0 || bytes.length + 1 > this.options.maxBytes) return;
    if (mark !== undefined && mark !== this.invalidations) return;
    this.lru.set(key, { bytes, argsHash }, { ttl: Math.min(ttlMs, this.options.maxAgeMs) });
  }

  delete(key: string): void {
    this.lru.delete(key);
  }

  get size(): number {
    return this.lru.size;
  }
}
