#!/usr/bin/env node
/**
 * `npx fire-once <command>`: operate the guard from a shell. Floor 3: it imports the core guard's
 * keys and dispatch-log format, and nothing imports it.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Command, CommanderError, Option } from 'commander';
import {
  DEFAULT_NAMESPACE,
  DEFAULT_PREFIX,
  checkId,
  connectionOf,
  keysFor,
  parseCount,
  parseArtifactTtl,
  parseSince,
  serverTimeMs,
  type CommonOptions,
} from './args';
import type { RedisClient } from '../core/scripts';
import { connect, isRedisError, redisFailure } from './connect';
import { FireOnceProtocolError } from '../core/errors';
import { isWrongType } from '../core/store-calls';
import { DEFAULT_SCAN_BUDGET } from './doctor/prefix-check';
import { runDoctor } from './doctor/doctor';
import { formatDoctor } from './doctor/format';
import { refuseEvictingRedis } from './eviction-check';
import { checkOptionValues } from './argv-check';
import { printable } from './printable';
import { CliError, EXIT, type ExitCode } from './exit-codes';
import { inspect } from './inspect';
import { formatInspection } from './inspect-format';
import { invalidate } from './invalidate';
import { formatRelease, formatInvalidate, formatMigrate } from './admin-format';
import { migrate } from './migrate';
import { release } from './release';
import { buildReport } from './report';
import { DEFAULT_SCOPE_LIMIT, formatReport } from './report-format';

/** Where the CLI writes; the tests pass their own. */
export interface Io {
  out(text: string): void;
  err(text: string): void;
}

const processIo: Io = { out: (t) => process.stdout.write(t), err: (t) => process.stderr.write(t) };

/** Run the CLI on `argv` (as `process.argv`: node, script, arguments...) and resolve its exit code. */
export async function main(argv: readonly string[], io: Io = processIo): Promise<ExitCode> {
  let code: ExitCode = EXIT.ok;
  let printed = false;
  const tracked: Io = { out: (text) => ((printed = true), io.out(text)), err: io.err };
  const program = buildProgram(tracked, (c) => {
    code = c;
  });
  // With --json a script parses stdout: a failure that printed nothing there prints what failed.
  // Only a --json before `--` asks for it: after it, "--json" is a scope.
  const args = argv.slice(2);
  const end = args.indexOf('--');
  const json = (end === -1 ? args : args.slice(0, end)).includes('--json');
  const jsonError = (message: string, exitCode: ExitCode) => {
    if (!printed && json) io.out(`${JSON.stringify({ error: message, exitCode })}\n`);
  };
  // `fire-once reprot --help` would print the top-level help and exit 0, as if the command were
  // fine: with an unknown command, --help is left out, so that commander names the command.
  const known =
    args[0] === undefined ||
    args[0].startsWith('-') ||
    args[0] === 'help' ||
    program.commands.some((c) => c.name() === args[0] || c.aliases().includes(args[0]));
  const parsed = known ? [...argv] : [...argv.slice(0, 2), ...args.filter((a, i) => (end !== -1 && i > end) || (a !== '--help' && a !== '-h'))];
  try {
    checkOptionValues(program, args);
    await program.parseAsync(parsed);
    return code;
  } catch (err) {
    if (err instanceof CommanderError) {
      // --help and --version end here with commander's exit code 0; every other commander error,
      // including a missing command, is bad usage, already told on stderr.
      if (err.exitCode === 0) return EXIT.ok;
      jsonError(err.message.replace(/^error: /, ''), EXIT.usage);
      return EXIT.usage;
    }
    if (err instanceof CliError) {
      io.err(`fire-once: ${err.message}\n`);
      jsonError(err.message, err.exitCode);
      return err.exitCode;
    }
    io.err(`fire-once: internal error: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    jsonError(`internal error: ${err instanceof Error ? err.message : String(err)}`, EXIT.internal);
    return EXIT.internal;
  }
}

function buildProgram(io: Io, setCode: (code: ExitCode) => void): Command {
  const program = new Command('fire-once')
    .description('Operate temporal-fire-once: read the dispatch log, inspect a scope, force-release a lock, invalidate an artifact, check a deployment.')
    .version(packageVersion(), '-V, --version')
    .configureOutput({ writeOut: io.out, writeErr: io.err })
    .exitOverride()
    .showHelpAfterError('(run with --help for usage)')
    .addHelpText('after', EXIT_HELP);

  common(program.command('report'))
    .description("Count the decisions in a namespace's dispatch log per job type and per scope, and list every scope dispatched more than once.")
    .option('--since <when>', 'window start: a duration back from now (30m, 1h, 7d), an ISO 8601 time, or "all"', '1h')
    .option('--job-type <jobType>', 'only this job type')
    .addOption(
      new Option('--limit <n>', 'scopes listed in the human output (0 for all)').default(DEFAULT_SCOPE_LIMIT).argParser((t) => parseCount('--limit', t, 0)),
    )
    .action(async (opts: CommonOptions & { since: string; jobType?: string; limit: number }) => {
      const keys = keysFor(opts);
      if (opts.jobType !== undefined) checkId('jobType', opts.jobType);
      parseSince(opts.since, Date.now()); // a bad --since is a usage error even when Redis is down
      const { report, logExists } = await withRedis(opts, io, async (redis) => {
        const nowMs = await serverTimeMs(redis);
        const fromMs = parseSince(opts.since, nowMs);
        if (fromMs > nowMs) {
          // An empty window would pass as "no duplicate": a mistyped year must not make a cron check pass.
          throw new CliError(
            `--since ${JSON.stringify(opts.since)} is after Redis's clock (${new Date(nowMs).toISOString()}): the window would be empty`,
            EXIT.usage,
          );
        }
        const built = await buildReport(redis, keys, {
          fromMs,
          toMs: nowMs,
          ...(opts.jobType === undefined ? {} : { jobType: opts.jobType }),
        });
        // No log at all is not "no duplicate": a mistyped prefix or namespace must not make a cron check pass either.
        return { report: built, logExists: built.events > 0 || (await redis.exists(keys.log())) === 1 };
      });
      const missing = logExists
        ? undefined
        : `no dispatch log at ${keys.log()}: nothing was ever recorded under this prefix and namespace (are they right, and the dispatchLog option on?)`;
      // In --json too, so that a script reading the report alone cannot take a missing log for a clean one.
      const printed = missing === undefined ? report : { ...report, error: missing, exitCode: EXIT.notFound };
      io.out(`${opts.json ? JSON.stringify(printed, null, 2) : formatReport(report, opts.limit)}\n`);
      if (missing !== undefined) {
        io.err(`${missing}\n`);
        setCode(EXIT.notFound);
      } else {
        setCode(report.duplicates.length > 0 ? EXIT.duplicates : EXIT.ok);
      }
    });

  common(program.command('inspect').argument('<scope>', 'the dispatch scope, e.g. the session ID'))
    .description("Show a scope's locks (holder, fencing token, TTL left, parked waiters) and artifacts (size, age, TTL left) in one namespace. Writes nothing.")
    .option('--step <step>', "only this step's lock")
    .option('--job-type <jobType>', "only this job type's artifact")
    .option('--artifact-ttl <duration>', 'the artifactTtlMs the artifact was written with (e.g. 7d): age = TTL - TTL left')
    .action(async (scope: string, opts: CommonOptions & { step?: string; jobType?: string; artifactTtl?: string }) => {
      const keys = keysFor(opts);
      checkId('scope', scope);
      if (opts.step !== undefined) checkId('step', opts.step);
      if (opts.jobType !== undefined) checkId('jobType', opts.jobType);
      const artifactTtlMs = opts.artifactTtl === undefined ? undefined : parseArtifactTtl(opts.artifactTtl);
      const view = await withRedis(opts, io, (redis) =>
        inspect(redis, keys, {
          scope,
          ...(opts.step === undefined ? {} : { step: opts.step }),
          ...(opts.jobType === undefined ? {} : { jobType: opts.jobType }),
          ...(artifactTtlMs === undefined ? {} : { artifactTtlMs }),
        }),
      );
      io.out(`${opts.json ? JSON.stringify(view, null, 2) : formatInspection(view)}\n`);
    });

  common(program.command('release').argument('<scope>', 'the dispatch scope'))
    .description('Force-release a stuck lock, e.g. after a worker crashed mid-dispatch. The next invocation dispatches again.')
    .requiredOption('--step <step>', 'the step whose lock to release')
    .option('--force', 'really release it; without it, only show what would be released (exit 2)')
    .action(async (scope: string, opts: CommonOptions & { step: string; force?: boolean }) => {
      const keys = keysFor(opts);
      checkId('scope', scope);
      checkId('step', opts.step);
      const result = await withRedis(opts, io, (redis) => release(redis, keys, scope, opts.step, opts.force === true));
      io.out(`${opts.json ? JSON.stringify(result, null, 2) : formatRelease(result)}\n`);
      if (!result.released) throw new CliError('refusing to release without --force', EXIT.usage);
      if (result.logError !== undefined) io.err(`fire-once: released, but the release-forced entry was not recorded: ${result.logError}\n`);
    });

  common(program.command('invalidate').argument('<scope>', 'the dispatch scope'))
    .description("Delete a job type's artifact so that the next invocation runs it again.")
    .requiredOption('--job-type <jobType>', 'the job type whose artifact to delete')
    .option('--force', 'really delete it; without it, only show what would be deleted (exit 2)')
    .action(async (scope: string, opts: CommonOptions & { jobType: string; force?: boolean }) => {
      const keys = keysFor(opts);
      checkId('scope', scope);
      checkId('jobType', opts.jobType);
      const result = await withRedis(opts, io, (redis) => invalidate(redis, keys, scope, opts.jobType, opts.force === true));
      io.out(`${opts.json ? JSON.stringify(result, null, 2) : formatInvalidate(result, opts)}\n`);
      if (!result.deleted) throw new CliError('refusing to invalidate without --force', EXIT.usage);
      if (result.logError !== undefined) io.err(`fire-once: invalidated, but the invalidated entry was not recorded: ${result.logError}\n`);
    });

  common(program.command('migrate'))
    .description('Upgrade a key prefix from protocol v2: copy its results into v3 (under --namespace) and mark the prefix v3. Stop the v2 workers first.')
    .option('--delete', 'delete the v2 keys once their results are copied')
    .action(async (opts: CommonOptions & { delete?: boolean }) => {
      const keys = keysFor(opts);
      const result = await withRedis(opts, io, (redis) => migrate(redis, keys, opts.delete === true));
      io.out(`${opts.json ? JSON.stringify(result, null, 2) : formatMigrate(result)}\n`);
      if (!result.done) {
        const longest = Math.max(...result.inFlight.map((l) => l.ttlMs));
        throw new CliError(
          `${result.inFlight.length} v2 dispatch(es) still in flight: stop the v2 workers, then run migrate again once their locks are gone (longest TTL left ${longest} ms)`,
          EXIT.conflict,
        );
      }
    });

  program
    .command('doctor')
    .description(
      'Check a deployment: eviction policy, persistence, replicas, min-replicas-to-write, Cluster slots, ACL permissions, scripts, version, key prefixes. One verdict per line, with the fix.',
    )
    .option('--redis <url>', 'Redis URL (default: $REDIS_URL, else redis://127.0.0.1:6379); any node of a Cluster')
    .option('--prefix <keyPrefix>', "the workers' keyPrefix: scopes the ACL check and the prefix listing", DEFAULT_PREFIX)
    .option(
      '--namespace <namespace>',
      'the namespace the workers file keys under (their keyNamespace, else their Temporal namespace) whose keys, channels and log the ACL check probes (a user per namespace)',
      DEFAULT_NAMESPACE,
    )
    .option('--acl-user <user>', "check this user's permissions with ACL DRYRUN (needs an admin connection) instead of the connected user's")
    .addOption(
      new Option('--scan-budget <n>', 'look at most at this many keys for prefixes')
        .default(DEFAULT_SCAN_BUDGET)
        .argParser((t) => parseCount('--scan-budget', t, 1)),
    )
    .option('--json', 'print the report as JSON')
    .option('--timeout <duration>', 'give up on Redis after this long, per command', '5s')
    .action(async (opts: CommonOptions & { aclUser?: string; scanBudget: number }) => {
      keysFor(opts); // a bad --prefix or --namespace is a usage error
      // Redis refuses a user name that is empty or holds a space or NUL: such a --acl-user could only
      // come back as a check that could not be made.
      if (opts.aclUser !== undefined && !/^[^\s\0]+$/.test(opts.aclUser)) {
        throw new CliError(`--acl-user must name a user (got ${JSON.stringify(opts.aclUser)}): a Redis user name is not empty and holds no space`, EXIT.usage);
      }
      const connection = connectionOf(opts);
      const report = await runDoctor(connection, {
        prefix: opts.prefix,
        namespace: opts.namespace,
        scanBudget: opts.scanBudget,
        ...(opts.aclUser === undefined ? {} : { aclUser: opts.aclUser }),
        ...(opts.redis === undefined ? {} : { redisArg: opts.redis }),
      }).catch((err: unknown) => {
        if (isRedisError(err)) throw redisFailure(connection.url, opts.prefix, err);
        throw err;
      });
      io.out(`${opts.json ? JSON.stringify(report, null, 2) : formatDoctor(report)}\n`);
      setCode(report.exitCode);
    });

  return program;
}

/** The options every command takes, so that they can follow the command name. */
function common(command: Command): Command {
  return command
    .option('--redis <url>', 'Redis URL: redis://[user:password@]host:port[/db], rediss:// for TLS (default: $REDIS_URL, else redis://127.0.0.1:6379)')
    .option('--prefix <keyPrefix>', "the workers' keyPrefix", DEFAULT_PREFIX)
    .option(
      '--namespace <namespace>',
      'the namespace the workers file keys under (their keyNamespace, else their Temporal namespace) whose keys and dispatch log to read (each has its own)',
      DEFAULT_NAMESPACE,
    )
    .option('--json', 'print JSON for scripts instead of tables')
    .option('--timeout <duration>', 'give up on Redis after this long, per command', '5s')
    .option('--allow-evicting-redis', "run even if Redis can evict the guard's keys (maxmemory-policy other than noeviction)");
}

/** Connect, refuse a Redis that can evict the guard's keys, run, disconnect. */
async function withRedis<T>(options: CommonOptions, io: Io, run: (redis: RedisClient) => Promise<T>): Promise<T> {
  const connection = connectionOf(options);
  const redis = await connect(connection);
  try {
    await refuseEvictingRedis(redis, { allow: options.allowEvictingRedis === true, timeoutMs: connection.timeoutMs, warn: io.err });
    return await run(redis);
  } catch (err) {
    // The CLI's own refusal already carries its exit code; its message may quote an ID that reads
    // like a Redis error (`: WRONGTYPE`, `ECONNREFUSED`).
    if (err instanceof CliError) throw err;
    // The guard's own wording for data it never writes (a WRONGTYPE among others), or Redis's.
    if (err instanceof FireOnceProtocolError)
      throw new CliError(`under ${options.prefix}:v3: ${err.message}; nothing was changed`, EXIT.unexpectedData, { cause: err });
    if (isWrongType(err)) {
      const keys = keysOfCommand(err);
      const which =
        keys.length === 1 ? `the key ${printable(keys[0])}` : keys.length > 1 ? `one of ${keys.map(printable).join(', ')}` : `a key under ${options.prefix}:v3`;
      const message = `${which} holds a Redis type this library never writes there (${(err as Error).message}); nothing was changed`;
      throw new CliError(message, EXIT.unexpectedData, { cause: err });
    }
    if (isRedisError(err)) throw redisFailure(connection.url, options.prefix, err);
    throw err;
  } finally {
    redis.disconnect();
  }
}

/** The keys of the command a Redis error answered, as ioredis records it on the error (`command`). */
function keysOfCommand(err: unknown): string[] {
  const command = (err as { command?: { name?: unknown; args?: unknown } }).command;
  if (!Array.isArray(command?.args)) return [];
  const args = command.args.map(String);
  if (command.name === 'evalsha' || command.name === 'eval') return args.slice(2, 2 + Number(args[1]));
  return args.slice(0, 1);
}

function packageVersion(): string {
  // src/cli and dist/cli both sit two levels below the package root.
  return (JSON.parse(readFileSync(join(__dirname, '..', '..', 'package.json'), 'utf8')) as { version: string }).version;
}

const EXIT_HELP = `
Exit codes:
  0   done; for report, no scope dispatched more than once in the window; for doctor,
      nothing puts the guarantee at risk
  1   report found a scope and step dispatched more than once; doctor found a risk
  2   usage error (an unknown command or option, an option with a value given twice or
      without it, a missing or malformed argument, an invalid ID or prefix), or
      release/invalidate without --force (nothing changed)
  3   Redis unreachable, refused the credentials or an ACL permission, or timed out
      (doctor lists the permissions missing)
  4   nothing to act on: no such lock (release), artifact (invalidate) or dispatch log (report)
  5   refused: release found the lock changed hands; migrate found v2 dispatches in
      flight or a prefix written by another protocol version
  6   refused: Redis can evict the guard's keys (maxmemory-policy is not noeviction, or
      cannot be read); --allow-evicting-redis runs the command anyway
  7   doctor found nothing at risk, but could not make every check
  8   refused: a key holds data this library never writes (release: a lock key of
      another type or with an unreadable value; migrate: a v2-shaped key whose IDs do
      not decode, or not as v2 encodes them; any command: a key of a Redis type it
      never writes); nothing changed
  70  internal error in the CLI
`;

if (require.main === module) {
  // A reader that stops early (`fire-once report | head`) closes the pipe: stop quietly, as Unix
  // tools do, instead of dying of an unhandled EPIPE.
  process.stdout.on('error', (err: NodeJS.ErrnoException) => {
    if (err.code !== 'EPIPE') throw err;
    process.exit(process.exitCode ?? 0);
  });
  void main(process.argv).then((code) => {
    process.exitCode = code;
  });
}
