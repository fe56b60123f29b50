import { randomBytes } from 'node:crypto';
import type { ActivityInterceptorsFactory, Worker } from '@temporalio/worker';
import { MockActivityEnvironment } from '@temporalio/testing';
import type { Info } from '@temporalio/activity';
import type { Redis } from 'ioredis';
import { FireOncePlugin, fireOnce, fireOnceContext } from '../../src';
import { connectRedis, deletePrefix, testPrefix } from '../support/redis';
import { CapturingLogger, jsonSafe, scanKeys, settle } from '../support/bystander';
import { lockToken, writeLock } from '../support/records';

// Logs, errors and the dispatch log carry keys, scope, step and holder, never an argument or
// result payload. Every path runs guarded activities whose arguments and results hold a secret;
// everything observable is captured (the activity logger at TRACE, console, process warnings,
// each thrown error's message, type, details, stack and causes, and the dispatch log stream)
// and searched for the secret, and for the raw lock tokens, which only a hash of may be shown.
describe('security: no payloads in logs or errors', () => {
  let redis: Redis;
  let prefix: string;
  let secret: string;
  let logger: CapturingLogger;
  let thrown: unknown[];
  let consoleLines: string[];
  const spies: jest.SpyInstance[] = [];
  const plugins: FireOncePlugin[] = [];

  beforeAll(() => {
    redis = connectRedis();
  });
  beforeEach(() => {
    prefix = testPrefix('logs');
    secret = `s3cr3t-${randomBytes(12).toString('hex')}`;
    logger = new CapturingLogger();
    thrown = [];
    consoleLines = [];
    for (const method of ['log', 'info', 'warn', 'error', 'debug'] as const) {
      spies.push(jest.spyOn(console, method).mockImplementation((...args: unknown[]) => void consoleLines.push(args.map(String).join(' '))));
    }
    spies.push(jest.spyOn(process, 'emitWarning').mockImplementation(((w: unknown) => void consoleLines.push(String(w))) as never));
  });
  afterEach(async () => {
    // A worker run ending is what closes the plugin's subscriber connection (used by 'wait').
    for (const plugin of plugins.splice(0)) await plugin.runWorker({} as Worker, async () => undefined);
    spies.splice(0).forEach((spy) => spy.mockRestore());
    await deletePrefix(redis, prefix);
  });
  afterAll(() => redis.quit());

  /** The worker's activity interceptor, built by the plugin (dispatch log on, as by default). */
  function worker(activities: Record<string, (...args: never[]) => Promise<unknown>>, options: { maxArtifactBytes?: number; leaseMs?: number } = {}) {
    const plugin = new FireOncePlugin({ redis, keyPrefix: prefix, pollIntervalMs: 20, ...options });
    plugins.push(plugin);
    const configured = plugin.configureWorker({ taskQueue: 'logs', activities });
    const factory = configured.interceptors?.activity?.at(-1) as ActivityInterceptorsFactory;
    let runs = 0;
    return (activityType: string, args: unknown[], info: Partial<Info> = {}) =>
      settle(
        new MockActivityEnvironment(
          {
            namespace: 'default',
            activityType,
            workflowExecution: { workflowId: 'chat-1', runId: `run-${++runs}` },
            startToCloseTimeoutMs: 10_000,
            currentAttemptScheduledTimestampMs: Date.now(),
            ...info,
          },
          { interceptors: [factory], logger },
        ).run(activities[activityType] as (...a: unknown[]) => Promise<unknown>, ...args),
      ).then((outcome) => {
        if (outcome.error !== undefined) thrown.push(outcome.error);
        return outcome;
      });
  }

  const args = (scope: string) => [scope, { apiKey: secret, text: `please summarise ${secret}` }];
  const scopeOf = { scope: ([scope]: unknown[]) => scope as string };

  /** Everything observable, as text; each thrown error with its type, details, stack and causes. */
  async function observable(): Promise<string> {
    const errors = thrown.map((err) => {
      const parts: string[] = [];
      for (
        let e = err as (Error & { type?: string; details?: unknown; context?: unknown }) | undefined, depth = 0;
        e && depth < 5;
        e = e.cause as typeof e, depth++
      ) {
        parts.push(
          `${e.name} ${e.type ?? ''} ${e.message} ${JSON.stringify(e.details ?? null, jsonSafe)} ${JSON.stringify(e.context ?? null, jsonSafe)} ${e.stack ?? ''}`,
        );
      }
      return parts.join('\ncaused by ');
    });
    const log = await redis.xrange(`${prefix}:log`, '-', '+');
    return [logger.text(), ...consoleLines, ...errors, JSON.stringify(log)].join('\n');
  }

  /** The secret and every raw lock token are absent; on failure, show where they leaked. */
  async function expectNothingLeaked() {
    const text = await observable();
    const tokens = (await Promise.all((await scanKeys(redis, `${prefix}:v3:*:l:*`)).map((key) => lockToken(redis, key)))).filter((t): t is string =>
      Boolean(t),
    );
    const leaks = [secret, ...tokens].flatMap((needle) =>
      text
        .split('\n')
        .filter((line) => line.includes(needle))
        .map((line) => line.slice(0, 300)),
    );
    expect(leaks).toEqual([]);
    expect(logger.entries.length).toBeGreaterThan(0); // the guard did log, so the check has teeth
    return tokens;
  }

  it('success path and fast-forward: no secret, no lock token', async () => {
    const run = worker({ job: fireOnce(async (_s: string, a: { apiKey: string }) => ({ token: a.apiKey, n: 1 }), scopeOf) });
    expect((await run('job', args('s'))).error).toBeUndefined();
    expect((await run('job', args('s'))).error).toBeUndefined(); // fast-forward
    await expectNothingLeaked();
  });

  it('failure path (the job throws; the lock is released): no secret, no lock token', async () => {
    const run = worker({
      job: fireOnce(async (_s: string, _a: unknown): Promise<string> => Promise.reject(new Error('upstream refused the request')), scopeOf),
    });
    expect((await run('job', args('s'))).error).toBeInstanceOf(Error);
    await expectNothingLeaked();
  });

  it('conflict path (same scope and step, other arguments): no secret, no lock token', async () => {
    const run = worker({ job: fireOnce(async (_s: string, a: { apiKey: string }) => ({ token: a.apiKey }), scopeOf) });
    await run('job', args('s'));
    const other = ['s', { apiKey: `${secret}-other`, text: `other ${secret}` }];
    expect(((await run('job', other)).error as { type?: string }).type).toBe('FireOnceKeyConflict');
    await expectNothingLeaked();
  });

  it("in-flight paths ('fail' at once, and 'wait' giving up before start-to-close): no secret, no lock token", async () => {
    let open!: () => void;
    const gate = new Promise<void>((resolve) => (open = resolve));
    let started!: () => void;
    const holderStarted = new Promise<void>((resolve) => (started = resolve));
    const body = async (_s: string, a: { apiKey: string }) => (started(), await gate, { token: a.apiKey });
    const run = worker({
      holder: fireOnce(body, { ...scopeOf, step: 'dispatch' }),
      failing: fireOnce(body, { ...scopeOf, step: 'dispatch', onInFlight: 'fail' }),
    });
    const holding = run('holder', args('s'));
    await holderStarted;
    expect(((await run('failing', args('s'))).error as { type?: string }).type).toBe('FireOnceInFlight');
    expect(((await run('holder', args('s'), { startToCloseTimeoutMs: 300 })).error as { type?: string }).type).toBe('FireOnceInFlight');
    open();
    expect((await holding).error).toBeUndefined();
    await expectNothingLeaked();
  });

  it('result over maxArtifactBytes (delivered, logged as FireOnceArtifactTooLarge): no secret, no lock token', async () => {
    const run = worker(
      { job: fireOnce(async (_s: string, a: { apiKey: string }) => ({ token: a.apiKey, pad: 'x'.repeat(4_000) }), scopeOf) },
      { maxArtifactBytes: 1_024 },
    );
    expect((await run('job', args('s'))).error).toBeUndefined();
    expect(logger.text()).toMatch(/FireOnceArtifactTooLarge/);
    expect(await expectNothingLeaked()).toHaveLength(1); // the held lock's token, searched for too
  });

  it('lease lost mid-dispatch (FireOnceLockLost): no secret, no lock token', async () => {
    const run = worker(
      {
        job: fireOnce(async (_s: string, _a: { apiKey: string }) => {
          const { signal, lockKey } = fireOnceContext();
          await writeLock(redis, lockKey, 'stolen-by-another-holder');
          await new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve()));
          throw signal.reason;
        }, scopeOf),
      },
      { leaseMs: 1_000 },
    );
    expect(((await run('job', args('s'))).error as { type?: string }).type).toBe('FireOnceLockLost');
    await expectNothingLeaked();
  });

  it('result the payload converter cannot serialise (FireOnceUnstorableResult): no secret, no lock token', async () => {
    const run = worker({ job: fireOnce(async (_s: string, a: { apiKey: string }): Promise<unknown> => [a.apiKey, 1n], scopeOf) });
    expect(((await run('job', args('s'))).error as { type?: string }).type).toBe('FireOnceUnstorableResult');
    await expectNothingLeaked();
  });
});
