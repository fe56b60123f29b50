import { createHash } from 'node:crypto';
import type { PayloadConverter } from '@temporalio/common';
import type { FireOnceOptions } from './activity-options';

/**
 * The hash stored with the lock and the artifact to detect calls with other arguments: SHA-256
 * over the payloads the worker's converter makes of the arguments (or of `conflictKey(args)`).
 * `''` when conflicts are ignored.
 */
export function argsHash(options: FireOnceOptions, args: readonly unknown[], converter: PayloadConverter): string {
  if (options.onConflict === 'ignore') return '';
  const values = options.conflictKey === undefined ? args : [options.conflictKey(args as unknown[])];
  const hash = createHash('sha256');
  for (const value of values) {
    const payload = converter.toPayload(value);
    for (const [key, bytes] of Object.entries(payload.metadata ?? {}).sort(([a], [b]) => (a < b ? -1 : 1))) {
      hash.update(`${key.length}:${key}${bytes?.length ?? 0}:`).update(bytes ?? new Uint8Array());
    }
    hash.update(`${payload.data?.length ?? 0}:`).update(payload.data ?? new Uint8Array());
  }
  return hash.digest('base64url');
}
