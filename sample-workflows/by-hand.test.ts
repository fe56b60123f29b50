import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { connectRedis, deletePrefix, testPrefix } from '../test/support/redis';
import { runScript, startScript, type RunningScript, type ScriptRun } from '../test/support/scripts';
import { runCli } from '../test/cli/run-cli';
import { waitFor } from '../test/support/wait';
import { Client, Connection } from '@temporalio/client';
import { temporal } from '@temporalio/proto';
import { dispatchesKey } from './result-cache/activities';
import { dispatchesKey as reportDispatchesKey } from './failure-then-retry/activities';

// Each sample's README has a "Run it" recipe: a worker (and for chat-session a job runner) in one
// shell, a client in another, and what the client prints. This suite follows those recipes as a
// user would, with the scripts as their own processes, against the suite's Redis and Temporal
// (REDIS_URL, TEMPORAL_ADDRESS), and checks each "It prints" claim of the README verbatim.
// Spawns several node processes per sample; slow on a loaded 2-core machine.
jest.setTimeout(300_000);

/**
 * The README's "It prints" claims, in order: an inline `code` span, or the lines of the fenced
 * block that follows "It prints:". Each becomes a pattern in which `…` stands for an ID.
 */
function printedClaims(sample: string, expected: number): RegExp[][] {
  const readme = readFileSync(join(__dirname, sample, 'README.md'), 'utf8');
  const claims: RegExp[][] = [];
  for (const match of readme.matchAll(/It prints(?: `([^`]+)`|:\s*```\n([\s\S]*?)\n\s*```)/g)) {
    const lines = match[1] !== undefined ? [match[1]] : match[2].split('\n').map((line) => line.trim());
    claims.push(lines.map((line) => new RegExp(line.replace(/[.*+?^${}()|[\]\\]/g, '\\$&').replace(/…/g, '[\\w-]+'))));
  }
  if (claims.length !== expected) throw new Error(`${sample}/README.md has ${claims.length} "It prints" claims, this test checks ${expected}`);
  return claims;
}

/** Assert that `run` exited 0, quietly, and that its stdout shows every line of `claim`, in order. */
function expectPrinted(run: ScriptRun, claim: RegExp[]): void {
  expect({ code: run.code, stderr: run.stderr }).toEqual({ code: 0, stderr: '' });
  const lines = run.stdout.split('\n');
  let at = 0;
  for (const pattern of claim) {
    const found = lines.findIndex((line, i) => i >= at && pattern.test(line));
    if (found < 0) throw new Error(`stdout does not show ${pattern} (after line ${at}):\n${run.stdout}`);
    at = found + 1;
  }
}

/** The ID a client chose, from its first line (`… for <id>:` or `… to <id>,`). */
function chosenId(run: ScriptRun, pattern: RegExp): string {
  const id = pattern.exec(run.stdout)?.[1];
  if (!id) throw new Error(`no ID matching ${pattern} in:\n${run.stdout}`);
  return id;
}

describe('the samples run by hand, as their READMEs say', () => {
  const redis = connectRedis();
  const services = { REDIS_URL: process.env.REDIS_URL!, TEMPORAL_ADDRESS: process.env.TEMPORAL_ADDRESS! };
  const prefixes: string[] = [];
  const running: RunningScript[] = [];

  /** Start a long-running script (worker, job runner) and wait for its "Ctrl-C to stop" line. */
  async function serve(script: string, env: Record<string, string>): Promise<RunningScript> {
    const proc = startScript(script, [], { ...services, ...env });
    running.push(proc);
    await proc.waitFor('Ctrl-C to stop');
    return proc;
  }

  /**
   * Ctrl-C every running script; each must shut down cleanly with exit code 0. (Their stderr is
   * the Temporal runtime's and the plugin's log, so it is shown, not required to be empty.)
   */
  async function interruptAll(): Promise<void> {
    const procs = running.splice(0);
    const codes = await Promise.all(procs.map((proc) => proc.interrupt()));
    const failed = procs.filter((_, i) => codes[i] !== 0).map((proc, i) => `exit ${codes[i]}:\n${proc.stderr()}`);
    expect(failed).toEqual([]);
  }

  function client(script: string, env: Record<string, string>): Promise<ScriptRun> {
    return runScript(script, [], { ...services, ...env });
  }

  /**
   * Start `clientScript`, wait until `started` says its job runs, `kill -9` the worker `served`
   * (no shutdown, nothing released), and serve `workerScript` again with `env`. Resolves the
   * client's run once it exits.
   */
  async function killWorkerMidJob(
    served: RunningScript,
    workerScript: string,
    env: Record<string, string>,
    clientScript: string,
    clientEnv: Record<string, string>,
    started: () => Promise<boolean>,
  ): Promise<{ run: ScriptRun }> {
    const proc = startScript(clientScript, [], { ...services, ...clientEnv });
    const exit = new Promise<number | null>((resolve) => proc.child.once('close', resolve));
    running.push(proc);
    await waitFor(`${clientScript}'s job to start`, started);
    const killed = new Promise((resolve) => served.child.once('close', resolve));
    served.child.kill('SIGKILL');
    await killed;
    running.splice(running.indexOf(served), 1);
    await serve(workerScript, env);
    const code = await exit;
    running.splice(running.indexOf(proc), 1);
    return { run: { code, stdout: proc.stdout(), stderr: proc.stderr() } };
  }

  /**
   * How each activity attempt that timed out and was retried ended, in the `runs` runs whose
   * workflow ID starts with `idPrefix`, as their histories say: `HEARTBEAT`, `START_TO_CLOSE`, ….
   */
  async function timeoutsOf(idPrefix: string, runs: number): Promise<string[]> {
    const connection = await Connection.connect({ address: services.TEMPORAL_ADDRESS });
    try {
      const client = new Client({ connection });
      const query = `WorkflowId STARTS_WITH "${idPrefix}"`;
      // Visibility lags the runs: wait until it lists them all.
      await waitFor(`${runs} runs listed under ${idPrefix}`, async () => (await client.workflow.count(query)).count === runs);
      const types: string[] = [];
      for await (const run of client.workflow.list({ query })) {
        const { events } = await client.workflow.getHandle(run.workflowId, run.runId).fetchHistory();
        // A retried attempt leaves no event of its own: the started event of the attempt after it
        // carries its failure (lastFailure).
        for (const event of events ?? []) {
          const timedOut = event.activityTaskStartedEventAttributes?.lastFailure?.timeoutFailureInfo?.timeoutType;
          // An enum number, or its name where the history was read as JSON.
          if (timedOut != null)
            types.push(String(typeof timedOut === 'number' ? temporal.api.enums.v1.TimeoutType[timedOut] : timedOut).replace('TIMEOUT_TYPE_', ''));
        }
      }
      return types;
    } finally {
      await connection.close();
    }
  }

  function fresh(name: string): string {
    const prefix = testPrefix(name);
    prefixes.push(prefix);
    return prefix;
  }

  afterEach(async () => {
    await Promise.all(running.splice(0).map((proc) => proc.stop()));
  });

  afterAll(async () => {
    for (const prefix of prefixes) await deletePrefix(redis, prefix);
    await redis.quit();
  });

  it('failure-then-retry: the first request fails, the next dispatches again, the rest reuse its report', async () => {
    const [requests] = printedClaims('failure-then-retry', 1);
    const KEY_PREFIX = fresh('by-hand-retry');
    await serve('sample-workflows/failure-then-retry/worker.ts', { KEY_PREFIX });
    expectPrinted(await client('sample-workflows/failure-then-retry/client.ts', {}), requests);
    await interruptAll();
  });

  it('failure-then-retry: a request whose worker is killed mid-render fails at the heartbeat timeout, not at start-to-close', async () => {
    const KEY_PREFIX = fresh('by-hand-retry-kill');
    const REPORT_ID = `report-kill-${Date.now()}`;
    const worker = 'sample-workflows/failure-then-retry/worker.ts';
    const served = await serve(worker, { KEY_PREFIX, JOB_MS: '20000' });
    const { run } = await killWorkerMidJob(
      served,
      worker,
      { KEY_PREFIX },
      'sample-workflows/failure-then-retry/client.ts',
      { REPORT_ID, REQUESTS: '1' },
      async () => {
        return (await redis.exists(reportDispatchesKey(KEY_PREFIX, REPORT_ID))) === 1;
      },
    );
    // workflows.ts: heartbeatTimeout 5 s, startToCloseTimeout 1 minute: the failure names the heartbeat.
    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(new RegExp(`^request 1 for ${REPORT_ID}: failed: .*heartbeat`, 'im'));
    await interruptAll();
  });

  it('result-cache: 5 racing runs share one result, and a later ask returns the stored one', async () => {
    const [first] = printedClaims('result-cache', 1);
    const KEY_PREFIX = fresh('by-hand-cache');
    await serve('sample-workflows/result-cache/worker.ts', { KEY_PREFIX });
    const burst = await client('sample-workflows/result-cache/client.ts', {});
    expectPrinted(burst, first);
    const summaries = burst.stdout.split('\n').filter((line) => line.startsWith('  {'));
    expect(summaries).toHaveLength(5);
    expect(summaries.every((line) => line.includes('"dispatch":1'))).toBe(true);

    // Step 5: "Both runs return the stored result at once": the same result, no new dispatch.
    const sessionId = chosenId(burst, / for (session-\w+) got/);
    const again = await client('sample-workflows/result-cache/client.ts', { SESSION_ID: sessionId, INVOCATIONS: '2' });
    expectPrinted(again, [new RegExp(`^2 runs for ${sessionId} got 1 distinct result\\(s\\):$`)]);
    expect(again.stdout.split('\n').filter((line) => line.startsWith('  {'))).toEqual([summaries[0], summaries[0]]);
    await interruptAll();
  });

  it('result-cache: a worker killed mid-job and started again: its attempts end by their heartbeat timeout, not at start-to-close, and every run gets the one result', async () => {
    const KEY_PREFIX = fresh('by-hand-cache-kill');
    const SESSION_ID = `session-kill-${Date.now()}`;
    const worker = 'sample-workflows/result-cache/worker.ts';
    // A short lease, so that the step is free soon after the kill: the test is of the timeout.
    const env = { KEY_PREFIX, LEASE_MS: '3000' };
    const served = await serve(worker, env);
    const { run } = await killWorkerMidJob(served, worker, env, 'sample-workflows/result-cache/client.ts', { SESSION_ID }, async () => {
      if ((await redis.exists(dispatchesKey(KEY_PREFIX, SESSION_ID))) === 0) return false;
      await new Promise((resolve) => setTimeout(resolve, 300)); // the other 4 runs park on its lock
      return true;
    });
    // workflows.ts: heartbeatTimeout 5 s, startToCloseTimeout 1 minute. The attempt that ran the
    // job and those parked on it died with the worker: each ends by its heartbeat timeout. Without
    // one, every run waited out the minute and each ended by START_TO_CLOSE.
    const timeouts = await timeoutsOf(`${SESSION_ID}-summary-`, 5);
    expect(timeouts.length).toBeGreaterThan(0);
    expect(new Set(timeouts)).toEqual(new Set(['HEARTBEAT']));
    expect(run.code).toBe(0);
    expect(run.stdout).toContain(`5 runs for ${SESSION_ID} got 1 distinct result(s)`);
    expect(run.stdout.split('\n').filter((line) => line.includes('"dispatch":2'))).toHaveLength(5);
    await interruptAll();
  });

  it('chat-session: guarded burst dispatches once, unguarded 8 times (and the report says so), a repeat fast-forwards', async () => {
    const [guarded, unguarded, repeat] = printedClaims('chat-session', 3);
    const KEY_PREFIX = fresh('by-hand-chat');
    const runner = await serve('sample-workflows/chat-session/job-runner.ts', { KEY_PREFIX });
    await serve('sample-workflows/chat-session/worker.ts', { KEY_PREFIX });

    const first = await client('sample-workflows/chat-session/client.ts', { KEY_PREFIX });
    expectPrinted(first, guarded);
    const guardedSession = chosenId(first, / to (session-\w+),/);
    expect(first.stdout).toContain(`  summary of ${guardedSession}, from dispatch #1 ("message 1")`);

    const burst = await client('sample-workflows/chat-session/client.ts', { KEY_PREFIX, STRATEGY: 'unguarded' });
    expectPrinted(burst, unguarded);
    const unguardedSession = chosenId(burst, / to (session-\w+),/);
    // "The job runner log shows 8 copies of the job."
    const started = (session: string): number =>
      runner
        .stdout()
        .split('\n')
        .filter((line) => line.endsWith(`started for ${session}`)).length;
    expect(started(unguardedSession)).toBe(8);
    expect(started(guardedSession)).toBe(1);

    // "`npx fire-once report --prefix chat-sample` lists the session with its 8 dispatches ... and exits 1."
    const report = await runCli(['report', '--prefix', KEY_PREFIX, '--json'], { REDIS_URL: services.REDIS_URL });
    expect(report.code).toBe(1);
    const duplicates = (JSON.parse(report.stdout) as { duplicates: { scope: string; dispatches: { runId: string }[] }[] }).duplicates;
    expect(duplicates.map((d) => ({ scope: d.scope, runs: new Set(d.dispatches.map((x) => x.runId)).size }))).toEqual([{ scope: unguardedSession, runs: 8 }]);

    // Two bursts to two new sessions at once: each client counts its own session's dispatch only.
    const both = await Promise.all([1, 2].map(() => client('sample-workflows/chat-session/client.ts', { KEY_PREFIX })));
    for (const run of both) expectPrinted(run, guarded);

    const again = await client('sample-workflows/chat-session/client.ts', { KEY_PREFIX, SESSION_ID: guardedSession });
    expectPrinted(again, repeat);
    expect(started(guardedSession)).toBe(1);
    await interruptAll();
  });
});
