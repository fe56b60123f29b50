import type { Redis } from 'ioredis';
import { FireOnceStoreUnavailable } from '../errors';

/** `INFO <section>` as a map of its `field:value` lines. */
export function parseInfo(text: string): Map<string, string> {
  const fields = new Map<string, string>();
  for (const line of text.split(/\r?\n/)) {
    const colon = line.indexOf(':');
    if (colon > 0 && !line.startsWith('#')) fields.set(line.slice(0, colon), line.slice(colon + 1).trim());
  }
  return fields;
}

/** Where a server setting can be read: an `INFO` field, and/or its `CONFIG GET` name. */
export interface SettingSource {
  readonly info?: { readonly section: string; readonly field: string };
  readonly config?: string;
}

/** A setting as read, or every reason it could not be. */
export type SettingRead =
  { readonly value: string; readonly source: 'INFO' | 'CONFIG GET' } | { readonly value: undefined; readonly reasons: readonly string[] };

/**
 * Read one setting of `node`: from `INFO` first, then from `CONFIG GET`. INFO comes first because
 * a least-privilege user may run it (the ACL documented in docs/reliability.md grants `+info`) while
 * `CONFIG` is admin-only, denied or renamed on most managed services; asking CONFIG first would
 * put a denial in `ACL LOG` at every start. A reply error (NOPERM, an unknown or renamed
 * command) moves on to the next source; a connection error is thrown.
 */
export async function readSetting(node: Redis, source: SettingSource): Promise<SettingRead> {
  const reasons: string[] = [];
  if (source.info) {
    const { section, field } = source.info;
    try {
      const value = parseInfo(await node.info(section)).get(field);
      if (value !== undefined) return { value, source: 'INFO' };
      reasons.push(`INFO ${section} has no ${field} field`);
    } catch (err) {
      reasons.push(`INFO ${section}: ${replyErrorMessage(err)}`);
    }
  }
  if (source.config) {
    try {
      const reply = (await node.call('CONFIG', 'GET', source.config)) as unknown;
      const value = configValue(reply, source.config);
      if (value !== undefined) return { value, source: 'CONFIG GET' };
      reasons.push(`CONFIG GET ${source.config} returned nothing`);
    } catch (err) {
      reasons.push(`CONFIG GET ${source.config}: ${replyErrorMessage(err)}`);
    }
  }
  return { value: undefined, reasons };
}

/** The value of `name` in a CONFIG GET reply: a flat `[name, value]` array (RESP2) or a map (RESP3). */
function configValue(reply: unknown, name: string): string | undefined {
  if (Array.isArray(reply)) {
    for (let i = 0; i + 1 < reply.length; i += 2) if (String(reply[i]) === name) return String(reply[i + 1]);
    return undefined;
  }
  if (reply instanceof Map) return reply.has(name) ? String(reply.get(name)) : undefined;
  if (reply !== null && typeof reply === 'object' && name in reply) return String((reply as Record<string, unknown>)[name]);
  return undefined;
}

/**
 * The message of a Redis reply error (the command ran and was refused); rethrows anything else.
 * Credentials Redis refused (`WRONGPASS`, `NOAUTH`; Redis 5: `ERR invalid password`) refuse every command, so they are no reason to
 * try another source: {@link FireOnceStoreUnavailable} naming them, not a setting left unread.
 */
export function replyErrorMessage(err: unknown): string {
  if (!(err instanceof Error && err.name === 'ReplyError')) throw err;
  const message = err.message.trim();
  if (/^(WRONGPASS|NOAUTH)\b|^ERR invalid password/.test(message)) {
    throw new FireOnceStoreUnavailable(
      `Redis refused this client's credentials (${message}): check the password or ACL user the client connects with`,
      {},
      { cause: err },
    );
  }
  return message;
}
