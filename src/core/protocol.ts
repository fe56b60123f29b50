import { FireOnceConfigError } from './errors';
import { PROTOCOL_VERSION, type FireOnceKeys } from './keys';
import type { RedisClient } from './scripts';
import { checkRedisClient } from './options';

/**
 * Claim the key prefix for this protocol version, or refuse: read `<prefix>:protocol`, and if it
 * is unset, `SET <prefix>:protocol 3 NX` and, if another worker won that race, read it again. A
 * prefix written by another version of the protocol (another release of this library, in any
 * language) is refused with {@link FireOnceConfigError}, since two versions on
 * one prefix never see each other's locks and would both dispatch. The marker has no TTL.
 *
 * @example
 * ```ts
 * import { FireOnceKeys, claimProtocol } from 'temporal-fire-once/core';
 * import { Redis } from 'ioredis';
 *
 * export async function startChecked(redis: Redis): Promise<void> {
 *   await claimProtocol(redis, new FireOnceKeys('fire-once')); // throws if another version owns the prefix
 * }
 * ```
 */
export async function claimProtocol(redis: RedisClient, keys: FireOnceKeys): Promise<void> {
  checkRedisClient(redis, 'claimProtocol');
  const marker = keys.protocolMarker();
  // Read first: a marker already set costs no write, so a user confined by ACL to one namespace,
  // who may read the marker but not write it (PROTOCOL.md §1), starts without a denial.
  let found = await redis.get(marker);
  if (found === null) {
    // Not `SET ... NX GET`: that needs Redis 7.0, and the library runs on 5.0.
    const set = await redis.set(marker, String(PROTOCOL_VERSION), 'NX').catch((err: unknown) => {
      if (!/NOPERM/.test((err as Error).message)) throw err;
      throw new FireOnceConfigError(
        `key prefix ${JSON.stringify(keys.prefix)} has no protocol marker (${marker}) and this Redis user may not write it: ` +
          `have an admin run SET ${marker} ${PROTOCOL_VERSION} once`,
        { key: marker },
      );
    });
    found = set === 'OK' ? null : await redis.get(marker);
  }
  if (found === null || found === String(PROTOCOL_VERSION)) return;
  throw new FireOnceConfigError(
    `key prefix ${JSON.stringify(keys.prefix)} is written with fire-once protocol ${JSON.stringify(found)} (${marker}); this worker speaks protocol ${PROTOCOL_VERSION}. ` +
      'Stop the workers of the other version and migrate (npx fire-once migrate), or give this worker another keyPrefix',
    { key: marker },
  );
}
