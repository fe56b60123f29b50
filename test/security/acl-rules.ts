import { readFileSync } from 'node:fs';
import { join } from 'node:path';

/** The user name of the documented ACL line. */
export const ACL_USER = 'fire-once-worker';

/**
 * The least-privilege ACL line exactly as `doc` (under docs/) documents it for `user`, so that the
 * document and the test can never disagree: the test runs what the reader copies.
 */
export function documentedAclLine(user = ACL_USER, doc = 'reliability.md'): string {
  return documentedLine(`ACL SETUSER ${user} reset `, doc);
}

/** The rules docs/operating.md says the CLI's test grants its user (`--redis` row), for `prefix`. */
export function documentedCliGrant(prefix: string): string[] {
  const doc = readFileSync(join(__dirname, '..', '..', 'docs', 'operating.md'), 'utf8');
  const grant = /The test grants `([^`]+)`/.exec(doc);
  if (grant === null) throw new Error('docs/operating.md no longer says what the test grants');
  return grant[1].replace(/<prefix>/g, prefix).split(/\s+/);
}

/** The commands docs/reliability.md's second line adds for a Redis Cluster (`+cluster|slots` …), without the `+`. */
export function clusterGrants(): string[] {
  return documentedLine(`ACL SETUSER ${ACL_USER} +`, 'reliability.md')
    .split(' ')
    .slice(3)
    .map((rule) => rule.slice(1));
}

function documentedLine(start: string, doc: string): string {
  const text = readFileSync(join(__dirname, '..', '..', 'docs', doc), 'utf8');
  const lines = text.split('\n').filter((line) => line.startsWith(start));
  if (lines.length !== 1) throw new Error(`docs/${doc} must contain exactly one "${start}…" line (found ${lines.length})`);
  return lines[0];
}

/**
 * The documented rules for a given key prefix and password: `fire-once` in the key and channel
 * patterns becomes `prefix`, `>CHANGE-ME` becomes `>password`.
 */
export function aclRules(prefix: string, password: string): string[] {
  const rules = documentedAclLine().split(' ').slice(3);
  return rules.map((rule) => {
    if (rule === '>CHANGE-ME') return `>${password}`;
    if (rule === '~fire-once:*') return `~${prefix}:*`;
    if (rule === '&fire-once:*') return `&${prefix}:*`;
    return rule;
  });
}

/** The commands the documented line grants (`+name`). */
export function grantedCommands(): string[] {
  return aclRules('p', 'x')
    .filter((rule) => rule.startsWith('+'))
    .map((rule) => rule.slice(1));
}

/** One ACL LOG entry, whatever protocol (RESP2 flat array or RESP3 map) it came back in. */
export interface AclDenial {
  readonly reason: string;
  readonly context: string;
  readonly object: string;
  readonly username: string;
}

export function parseAclLog(reply: unknown): AclDenial[] {
  return (reply as unknown[]).map((entry) => {
    const fields: Record<string, unknown> = {};
    if (Array.isArray(entry)) for (let i = 0; i + 1 < entry.length; i += 2) fields[String(entry[i])] = entry[i + 1];
    else if (entry instanceof Map) for (const [k, v] of entry) fields[String(k)] = v;
    else Object.assign(fields, entry);
    return { reason: String(fields.reason), context: String(fields.context), object: String(fields.object), username: String(fields.username) };
  });
}
