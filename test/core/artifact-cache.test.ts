import { FireOnceConfigError } from '../../src';
import { Cluster } from 'ioredis';
import { ARTIFACT_CACHE_DEFAULTS, ArtifactCache, WakeHub } from '../../src/core';

// `ArtifactCache` is public (`temporal-fire-once/core`), for workers wired by hand. The plugin's
// `localCache` checks its bounds; the constructor took them as given: a `maxAgeMs` of 0, which the
// LRU reads as "no TTL", kept entries past their artifact's TTL in Redis, and `NaN` failed inside
// the LRU with an untyped `TypeError`.
describe('ArtifactCache', () => {
  it.each<[string, Record<string, unknown>, string]>([
    ['a maxAgeMs of 0', { maxAgeMs: 0 }, 'ArtifactCache: maxAgeMs must be a positive integer (got 0)'],
    ['a NaN maxEntries', { maxEntries: NaN }, 'ArtifactCache: maxEntries must be a positive integer (got NaN)'],
    ['a negative maxBytes', { maxBytes: -5 }, 'ArtifactCache: maxBytes must be a positive integer (got -5)'],
    ['a misspelt bound', { maxAge: 1_000 }, 'ArtifactCache: unknown option "maxAge"'],
  ])('refuses %s with FireOnceConfigError, naming it', (_name, bad, message) => {
    expect(() => new ArtifactCache({ ...ARTIFACT_CACHE_DEFAULTS, ...bad })).toThrow(new FireOnceConfigError(message));
  });

  it('takes the bounds it is given', () => {
    expect(new ArtifactCache({ maxEntries: 1, maxBytes: 2, maxAgeMs: 3 }).options).toEqual({ maxEntries: 1, maxBytes: 2, maxAgeMs: 3 });
  });

  // The plugin refuses `localCache` with a Cluster client: ioredis re-subscribes a Cluster's
  // subscriber silently, so a gap in which invalidations are lost cannot be seen, and the cache
  // would serve an invalidated artifact. A cache wired by hand must be refused the same way.
  it('refuses to attach to a hub on a Redis Cluster client, as the plugin refuses localCache', async () => {
    const cluster = new Cluster([{ host: '127.0.0.1', port: 1 }], { lazyConnect: true, enableOfflineQueue: false, clusterRetryStrategy: () => null });
    try {
      const cache = new ArtifactCache({ ...ARTIFACT_CACHE_DEFAULTS });
      await expect(cache.attach(new WakeHub(cluster), ['channel'])).rejects.toThrow(FireOnceConfigError);
      await expect(cache.attach(new WakeHub(cluster), ['channel'])).rejects.toThrow(/Redis Cluster/);
      expect(cache.follows('channel')).toBe(false);
    } finally {
      cluster.disconnect();
    }
  });
});
