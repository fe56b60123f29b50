import { DEFAULT_NAMESPACE, DEFAULT_PREFIX } from './args';
import { redactUrl } from './connect';
import { CONTROL_CHARACTER } from './printable';

/** Arguments a POSIX shell passes on as they are, unquoted. */
const PLAIN = /^[A-Za-z0-9._/:-]+$/;

/**
 * One argument quoted for a POSIX shell, so that pasting it passes exactly `arg`: plain text as it
 * is, anything else in single quotes (`'it'\''s'`), where `$`, backquotes and backslashes are
 * literal. An argument holding a control character cannot be printed raw, so it is written in
 * `$'…'` with octal escapes, which bash, zsh, ksh and POSIX.1-2024 shells read (an older dash
 * reads it as another, literal, string: the command then finds nothing to act on).
 */
export function shellQuote(arg: string): string {
  if (PLAIN.test(arg)) return arg;
  if (!CONTROL_CHARACTER.test(arg)) return `'${arg.replace(/'/g, `'\\''`)}'`;
  let out = '';
  for (const ch of arg) {
    if (ch === '\\' || ch === "'") out += `\\${ch}`;
    else if (CONTROL_CHARACTER.test(ch)) for (const byte of Buffer.from(ch, 'utf8')) out += `\\${byte.toString(8).padStart(3, '0')}`;
    else out += ch;
  }
  return `$'${out}'`;
}

/** The options that say which Redis, prefix and namespace a command acts on, as given. */
export interface Target {
  /** `--redis` as given; `undefined` when it came from `REDIS_URL` or the default. */
  readonly redis?: string;
  readonly prefix: string;
  readonly namespace: string;
  readonly allowEvictingRedis?: boolean;
}

/**
 * A `fire-once` command line to paste: `args`, then the options that make it act where this one
 * did (`--redis` if it was given, with its password as `***`; `--prefix` and `--namespace` unless
 * default; `--allow-evicting-redis` if given), every argument quoted for the shell. An operand that
 * starts with `-` goes last, after `--`, so that it is not read as an option.
 */
export function fireOnceCommand(command: string, operand: string | undefined, options: readonly string[], target: Target): string {
  const where = [
    ...(target.redis === undefined ? [] : ['--redis', hasPassword(target.redis) ? redactUrl(target.redis) : target.redis]),
    ...(target.prefix === DEFAULT_PREFIX ? [] : ['--prefix', target.prefix]),
    ...(target.namespace === DEFAULT_NAMESPACE ? [] : ['--namespace', target.namespace]),
    ...(target.allowEvictingRedis === true ? ['--allow-evicting-redis'] : []),
  ];
  const args =
    operand === undefined
      ? [command, ...options, ...where]
      : operand.startsWith('-')
        ? [command, ...options, ...where, '--', operand]
        : [command, operand, ...options, ...where];
  return ['fire-once', ...args.map(shellQuote)].join(' ');
}

function hasPassword(url: string): boolean {
  try {
    return new URL(url).password !== '';
  } catch {
    return false;
  }
}
