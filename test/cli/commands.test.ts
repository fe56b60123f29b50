import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Redis } from 'ioredis';
import { FireOnceCorruptArtifact, FireOnceGuard } from '../../src';
import { DispatchLog, holderId, parseEvent, type DispatchEvent } from '../../src/core';
import { connectRedis, deletePrefix, refusedPort, testPrefix } from '../support/redis';
import { runCli } from './run-cli';

// Every command of `fire-once`, each run as its own process against the suite's real Redis, on
// keys the guard itself wrote: locks and artifacts through FireOnceGuard, log entries through
// DispatchLog. Each test has its own key prefix and deletes only that.
// Each test spawns several CLI processes; on a loaded 2-core machine one can take seconds.
jest.setTimeout(300_000);

describe('fire-once CLI against a real Redis', () => {
  let redis: Redis;
  let url: string;
  const prefixes: string[] = [];

  beforeAll(() => {
    redis = connectRedis();
    url = process.env.REDIS_URL!;
  });
  afterAll(async () => {
    for (const prefix of prefixes) await deletePrefix(redis, prefix);
    await redis.quit();
  });

  function fresh(name: string): { prefix: string; guard: FireOnceGuard; log: DispatchLog } {
    const prefix = testPrefix(name);
    prefixes.push(prefix);
    const guard = new FireOnceGuard({ redis, keyPrefix: prefix });
    return { prefix, guard, log: new DispatchLog(redis, guard.keys, 10_000) };
  }

  /** DispatchLog.record does not wait; its flush does. */
  async function record(log: DispatchLog, events: readonly DispatchEvent[]): Promise<void> {
    for (const event of events) log.record(event);
    await log.flush();
    expect(log.dropped).toBe(0);
  }

  const cli = (args: readonly string[], env?: Record<string, string | undefined>) => runCli([...args, '--redis', url], env);
  const json = <T>(stdout: string) => JSON.parse(stdout) as T;

  describe('report', () => {
    const base = { step: 'dispatch-summary', jobType: 'summary' };

    it('counts decisions per job type and per scope, flags the scope dispatched twice with its workflow and run IDs, and exits 1', async () => {
      const { prefix, log } = fresh('cli-report');
      await record(log, [
        { decision: 'dispatched', scope: 'session-a', ...base, workflowId: 'wf-a1', runId: 'run-a1', attempt: 1, holder: 'h-a1', fencingToken: 1 },
        { decision: 'committed', scope: 'session-a', ...base, workflowId: 'wf-a1', runId: 'run-a1', holder: 'h-a1', fencingToken: 1 },
        { decision: 'fast-forwarded', scope: 'session-a', ...base, workflowId: 'wf-a2', runId: 'run-a2' },
        { decision: 'dispatched', scope: 'session-b', ...base, workflowId: 'wf-b1', runId: 'run-b1', attempt: 1, holder: 'h-b1', fencingToken: 1 },
        { decision: 'released-on-failure', scope: 'session-b', ...base, holder: 'h-b1', fencingToken: 1 },
        { decision: 'dispatched', scope: 'session-b', ...base, workflowId: 'wf-b2', runId: 'run-b2', attempt: 1, holder: 'h-b2', fencingToken: 2 },
        { decision: 'dispatched', scope: 'session-c', step: 'send', jobType: 'mail', workflowId: 'wf-c1', runId: 'run-c1' },
      ]);

      const run = await cli(['report', '--prefix', prefix, '--json']);
      expect(run.stderr).toBe('');
      expect(run.code).toBe(1);
      const report = json<{
        events: number;
        byJobType: { jobType: string; counts: Record<string, number> }[];
        byScope: { scope: string; counts: Record<string, number> }[];
        duplicates: { scope: string; step: string; jobType: string; dispatches: { workflowId: string; runId: string; outcome?: string }[] }[];
      }>(run.stdout);
      expect(report.events).toBe(7);
      expect(report.byJobType).toEqual([
        { jobType: 'mail', counts: { dispatched: 1 }, total: 1 },
        { jobType: 'summary', counts: { dispatched: 3, committed: 1, 'fast-forwarded': 1, 'released-on-failure': 1 }, total: 6 },
      ]);
      expect(report.byScope.find((s) => s.scope === 'session-a')?.counts).toEqual({ dispatched: 1, committed: 1, 'fast-forwarded': 1 });
      expect(report.duplicates).toHaveLength(1);
      expect(report.duplicates[0]).toMatchObject({ scope: 'session-b', step: 'dispatch-summary', jobType: 'summary' });
      expect(report.duplicates[0].dispatches.map((d) => [d.workflowId, d.runId, d.outcome])).toEqual([
        ['wf-b1', 'run-b1', 'released-on-failure'],
        ['wf-b2', 'run-b2', undefined],
      ]);

      const human = await cli(['report', '--prefix', prefix]);
      expect(human.code).toBe(1);
      expect(human.stdout).toContain('duplicates: 1 scope(s) dispatched more than once');
      expect(human.stdout).toMatch(/scope "session-b", step "dispatch-summary", job type "summary": 2 dispatches/);
      expect(human.stdout).toMatch(/wf-b1 .* run-b1/);
    });

    // The report prints every time in UTC and reads a date alone as UTC midnight: a date and time
    // without an offset is UTC too, so that a cron check's window does not move with the host's TZ.
    it.each(['Etc/GMT+1', 'Asia/Tokyo'])('reads an ISO --since without an offset as UTC under TZ=%s; an offset is kept', async (tz) => {
      const { prefix } = fresh('cli-since-tz');
      const from = async (since: string) =>
        json<{ from: string }>((await cli(['report', '--prefix', prefix, '--since', since, '--json'], { TZ: tz })).stdout).from;
      expect(await from('2026-01-02T09:00:00')).toBe('2026-01-02T09:00:00.000Z');
      expect(await from('2026-01-02T09:00')).toBe('2026-01-02T09:00:00.000Z');
      expect(await from('2026-01-02 09:00')).toBe('2026-01-02T09:00:00.000Z'); // a space, which Date.parse also takes
      expect(await from('2026-01-02T09:00:00+01:00')).toBe('2026-01-02T08:00:00.000Z');
    });

    it('exits 0 with no duplicate, filters by --job-type, and reads only the --since window', async () => {
      const { prefix, guard } = fresh('cli-window');
      const now = Number((await redis.time())[0]) * 1000;
      // Entries with explicit IDs two hours back, then one now: only the last is in a 1h window.
      const old = (n: number) => `${now - 2 * 3_600_000 + n}-0`;
      await redis.xadd(guard.keys.log(), old(0), 'decision', 'dispatched', 'scope', 's1', 'step', 'x', 'jobType', 'summary', 'workflowId', 'old-1');
      await redis.xadd(guard.keys.log(), old(1), 'decision', 'dispatched', 'scope', 's1', 'step', 'x', 'jobType', 'summary', 'workflowId', 'old-2');
      await redis.xadd(guard.keys.log(), '*', 'decision', 'dispatched', 'scope', 's1', 'step', 'x', 'jobType', 'summary', 'workflowId', 'new-1');
      await redis.xadd(guard.keys.log(), '*', 'decision', 'dispatched', 'scope', 's2', 'step', 'y', 'jobType', 'mail', 'workflowId', 'new-2');

      const recent = await cli(['report', '--prefix', prefix, '--json']);
      expect(recent.code).toBe(0);
      expect(json<{ events: number; duplicates: unknown[] }>(recent.stdout)).toMatchObject({ events: 2, duplicates: [] });

      const all = await cli(['report', '--prefix', prefix, '--since', '3h', '--job-type', 'summary', '--json']);
      expect(all.code).toBe(1);
      const report = json<{ events: number; byJobType: { jobType: string }[]; duplicates: { dispatches: { workflowId: string }[] }[] }>(all.stdout);
      expect(report.events).toBe(3);
      expect(report.byJobType.map((j) => j.jobType)).toEqual(['summary']);
      expect(report.duplicates[0].dispatches.map((d) => d.workflowId)).toEqual(['old-1', 'old-2', 'new-1']);

      const human = await cli(['report', '--prefix', prefix]);
      expect(human.code).toBe(0);
      expect(human.stdout).toContain('duplicates: none');
    });

    it('counts a dispatch after `invalidate` as a fresh start, not a duplicate; two after it are one', async () => {
      const { prefix, guard } = fresh('cli-invalidated');
      const entry = (decision: string, workflowId?: string) =>
        redis.xadd(
          guard.keys.log(),
          '*',
          'decision',
          decision,
          'scope',
          's1',
          'step',
          'x',
          'jobType',
          'summary',
          ...(workflowId ? ['workflowId', workflowId] : []),
        );
      await entry('dispatched', 'before');
      await entry('committed');
      await entry('invalidated');
      await entry('dispatched', 'after');
      const fresh1 = await cli(['report', '--prefix', prefix, '--json']);
      expect(json<{ duplicates: unknown[] }>(fresh1.stdout).duplicates).toEqual([]);
      expect(fresh1.code).toBe(0);

      await entry('dispatched', 'after-again');
      const twice = await cli(['report', '--prefix', prefix, '--json']);
      expect(twice.code).toBe(1);
      const report = json<{ duplicates: { dispatches: { workflowId: string }[] }[] }>(twice.stdout);
      expect(report.duplicates.map((d) => d.dispatches.map((x) => x.workflowId))).toEqual([['after', 'after-again']]);
    });

    it("never takes two (job type, scope) pairs for one when IDs hold NUL: no forged duplicate, and no invalidation of one hides the other's", async () => {
      const { prefix, guard } = fresh('cli-report-nul');
      const entry = (decision: string, jobType: string, scope: string, workflowId: string) =>
        redis.xadd(guard.keys.log(), '*', 'decision', decision, 'scope', scope, 'step', 'x', 'jobType', jobType, 'workflowId', workflowId);
      // Job type "j" in scope "a\0b", and job type "j\0a" in scope "b": one dispatch each, no duplicate.
      await entry('dispatched', 'j', 'a\u0000b', 'wf-1');
      await entry('dispatched', 'j\u0000a', 'b', 'wf-2');
      const once = await cli(['report', '--prefix', prefix, '--json']);
      expect(json<{ duplicates: unknown[] }>(once.stdout).duplicates).toEqual([]);
      expect(once.code).toBe(0);

      // Scope "a\0b" dispatched again: a duplicate, which an invalidation of the other pair must not hide.
      await entry('invalidated', 'j\u0000a', 'b', 'cli');
      await entry('dispatched', 'j', 'a\u0000b', 'wf-3');
      const twice = await cli(['report', '--prefix', prefix, '--json']);
      const report = json<{ duplicates: { jobType: string; scope: string; dispatches: { workflowId: string }[] }[] }>(twice.stdout);
      expect(report.duplicates.map((d) => [d.jobType, d.scope, d.dispatches.map((x) => x.workflowId)])).toEqual([['j', 'a\u0000b', ['wf-1', 'wf-3']]]);
      expect(twice.code).toBe(1);
    });

    it('escapes control characters in the IDs it prints, so a scope cannot forge or hide lines; --json keeps them as they are', async () => {
      const { prefix, guard } = fresh('cli-report-forge');
      const forged = 'evil\n\nduplicates: none (no scope and step was dispatched more than once in this window)';
      const ansi = 'clear\u001b[2J\u009b31m\u202eright-to-left\u200b\ufeff\u00ad\u{e0041}';
      for (const [scope, workflowId] of [
        [forged, 'wf-1'],
        [forged, 'wf-2\rwf-forged'],
        [ansi, 'wf-3'],
      ]) {
        await redis.xadd(guard.keys.log(), '*', 'decision', 'dispatched', 'scope', scope, 'step', 'x', 'jobType', 'j\tk', 'workflowId', workflowId);
      }
      const human = await cli(['report', '--prefix', prefix]);
      expect(human.code).toBe(1);
      const lines = human.stdout.split('\n');
      expect(lines.filter((line) => line.startsWith('duplicates:'))).toEqual(['duplicates: 1 scope(s) dispatched more than once in this window']);
      expect(human.stdout.replace(/\n/g, '')).not.toMatch(/[\p{Cc}\p{Cf}]/u); // no control or format character but the line ends
      expect(human.stdout).toContain('evil\\n\\nduplicates: none');
      expect(human.stdout).toContain('clear\\u001b[2J\\u009b31m\\u202eright-to-left\\u200b\\ufeff\\u00ad\\udb40\\udc41'); // a tag character: both halves
      expect(human.stdout).toContain('wf-2\\rwf-forged');
      expect(human.stdout).toContain('j\\tk');
      expect(human.stdout).toContain(`scope "evil\\n\\nduplicates: none`);

      const machine = await cli(['report', '--prefix', prefix, '--json']);
      const report = json<{ byScope: { scope: string }[] }>(machine.stdout);
      expect(report.byScope.map((s) => s.scope).sort()).toEqual([ansi, forged].sort());
    });

    it('reads a log longer than one page, entry for entry', async () => {
      const { prefix, guard } = fresh('cli-pages');
      const total = 23_456; // more than two XRANGE pages of 10,000
      for (let i = 0; i < total; i += 1_000) {
        const pipeline = redis.pipeline();
        for (let j = i; j < Math.min(i + 1_000, total); j++) {
          // Scope and job type with multi-byte UTF-8, so that chunk boundaries fall inside characters.
          pipeline.xadd(
            guard.keys.log(),
            '*',
            'decision',
            j % 10 === 0 ? 'dispatched' : 'fast-forwarded',
            'scope',
            `sessión-${j % 100}`,
            'step',
            'st',
            'jobType',
            'résumé',
            'workflowId',
            `wf-${j}`,
          );
        }
        await pipeline.exec();
      }
      const run = await cli(['report', '--prefix', prefix, '--json']);
      expect(run.code).toBe(1);
      const report = json<{ events: number; byJobType: { jobType: string; counts: Record<string, number> }[]; byScope: unknown[]; duplicates: unknown[] }>(
        run.stdout,
      );
      expect(report.events).toBe(total);
      expect(report.byJobType).toEqual([{ jobType: 'résumé', counts: { dispatched: 2_346, 'fast-forwarded': total - 2_346 }, total }]);
      expect(report.byScope).toHaveLength(100);
      expect(report.duplicates).toHaveLength(10); // scopes 0, 10, ..., 90 each dispatched 235 or 234 times
    });

    it('reports an empty window plainly: exit 0 when the log has entries outside it, 4 when there is no log at all (a mistyped prefix)', async () => {
      const { prefix, guard } = fresh('cli-empty');
      const missing = await cli(['report', '--prefix', prefix]);
      expect(missing.stdout).toContain('0 event(s)');
      expect(missing.stderr).toBe(
        `no dispatch log at ${guard.keys.log()}: nothing was ever recorded under this prefix and namespace (are they right, and the dispatchLog option on?)\n`,
      );
      expect(missing.code).toBe(4);
      // --json says so in the report too, for a script that reads it and not the exit code.
      const missingJson = await cli(['report', '--prefix', prefix, '--json']);
      expect([missingJson.code, json<{ events: number; error: string; exitCode: number }>(missingJson.stdout)]).toEqual([
        4,
        expect.objectContaining({ events: 0, error: expect.stringMatching(/^no dispatch log at /), exitCode: 4 }),
      ]);
      await redis.xadd(guard.keys.log(), '1-1', 'decision', 'dispatched'); // long before the window
      const empty = await cli(['report', '--prefix', prefix]);
      expect(empty.stdout).toContain('0 event(s)');
      expect(empty.stdout).toContain('are the prefix and namespace right');
      expect(empty.stderr).toBe('');
      expect(empty.code).toBe(0);
      expect(json<object>((await cli(['report', '--prefix', prefix, '--json'])).stdout)).not.toHaveProperty('error');
      // A --job-type that matches nothing is named in the hint.
      const typo = await cli(['report', '--prefix', prefix, '--job-type', 'sumary']);
      expect([typo.code, typo.stdout]).toEqual([0, expect.stringContaining('no decisions of job type "sumary" recorded in this window (is --job-type right?')]);
    });
  });

  describe('inspect', () => {
    it("shows the lock's holder, fencing token and TTL, and the artifact's size, age and TTL", async () => {
      const { prefix, guard, log } = fresh('cli-inspect');
      const target = { scope: 'chat:7', step: 'summarise', jobType: 'summary', holder: 'wf-1 run-1 1' };
      const outcome = await guard.acquire(target, { lockTtlMs: 60_000 });
      if (outcome.kind !== 'acquired') throw new Error(`expected to acquire, got ${outcome.kind}`);
      // Another step with the same job type has finished: its commit wrote the artifact (and took its own lock with it).
      const other = await guard.acquire({ ...target, step: 'resend', holder: 'wf-0 run-1 1' });
      if (other.kind !== 'acquired') throw new Error(`expected to acquire, got ${other.kind}`);
      await guard.commit(other.lease, Buffer.from('x'.repeat(321)), { artifactTtlMs: 3_600_000 });
      await record(log, [
        {
          decision: 'committed',
          scope: 'chat:7',
          step: 'resend',
          jobType: 'summary',
          holder: holderId(other.lease.token),
          fencingToken: other.lease.fencingToken,
        },
      ]);

      const run = await cli(['inspect', 'chat:7', '--prefix', prefix, '--json']);
      expect(run.stderr).toBe('');
      expect(run.code).toBe(0);
      const view = json<{ namespace: string; serverTime: string; locks: Record<string, unknown>[]; artifacts: Record<string, unknown>[] }>(run.stdout);
      expect(view.namespace).toBe('default');
      expect(view.locks).toEqual([
        expect.objectContaining({
          step: 'summarise',
          key: guard.keys.lock('chat:7', 'summarise'),
          present: true,
          holder: 'wf-1 run-1 1',
          tokenHash: holderId(outcome.lease.token),
          fencingToken: outcome.lease.fencingToken,
          parkedWaiters: 0,
        }),
      ]);
      expect(view.locks[0].ttlMs).toBeGreaterThan(0);
      expect(view.locks[0].ttlMs).toBeLessThanOrEqual(60_000);
      // Held for: Redis's clock at the inspect minus the fencing token (Redis's clock at the acquire).
      expect(view.locks[0].heldMs).toBe(Math.max(0, Date.parse(view.serverTime) - Math.floor(outcome.lease.fencingToken / 1_000)));
      expect(view.artifacts).toEqual([expect.objectContaining({ jobType: 'summary', kind: 'artifact', present: true, bytes: 321, ageFrom: 'dispatch-log' })]);
      expect(view.artifacts[0].ttlMs).toBeLessThanOrEqual(3_600_000);
      expect(JSON.stringify(view)).not.toContain(outcome.lease.token); // the token itself is never shown

      const withTtl = await cli(['inspect', 'chat:7', '--prefix', prefix, '--job-type', 'summary', '--artifact-ttl', '1h', '--json']);
      const artifact = json<{ artifacts: { kind: string; ageMs: number; ageFrom: string }[] }>(withTtl.stdout).artifacts[0];
      expect(artifact.ageFrom).toBe('artifact-ttl');
      expect(artifact.ageMs).toBeGreaterThanOrEqual(0);
      expect(artifact.ageMs).toBeLessThan(120_000);
      // The longest artifactTtlMs the options accept is taken (defect 172 refuses only past it).
      const longest = await cli(['inspect', 'chat:7', '--prefix', prefix, '--job-type', 'summary', '--artifact-ttl', '365d', '--json']);
      expect(longest.code).toBe(0);
      expect(json<{ artifacts: { ageFrom: string }[] }>(longest.stdout).artifacts[0]!.ageFrom).toBe('artifact-ttl');
      // One shorter than the TTL left cannot be the one it was written with: said, not silently passed over.
      const short = await cli(['inspect', 'chat:7', '--prefix', prefix, '--job-type', 'summary', '--artifact-ttl', '1m']);
      expect(short.stdout).toMatch(
        / \(since its committed entry in the dispatch log; --artifact-ttl is shorter than its TTL left, or it has none, so it was not written with that TTL\)/,
      );
      expect(
        json<{ artifacts: { artifactTtlWrong?: boolean }[] }>(
          (await cli(['inspect', 'chat:7', '--prefix', prefix, '--job-type', 'summary', '--artifact-ttl', '1m', '--json'])).stdout,
        ).artifacts[0]!.artifactTtlWrong,
      ).toBe(true);

      const human = await cli(['inspect', 'chat:7', '--prefix', prefix]);
      expect(human.stdout).toContain('lock of step "summarise": held');
      expect(human.stdout).toContain('wf-1 run-1 1');
      expect(human.stdout).toMatch(/│ held for +│ [\d.]+ (ms|s) \(Redis's clock now, minus the fencing token\)/);
      expect(human.stdout).toContain('artifact of job type "summary": present');
      expect(human.stdout).toContain('321 bytes');
    });

    it('says so when nothing is stored for the scope, and where to look for a mistyped prefix or namespace', async () => {
      const { prefix } = fresh('cli-inspect-none');
      const run = await cli(['inspect', 'session-nobody', '--prefix', prefix]);
      expect(run.code).toBe(0);
      expect(run.stdout).toContain(
        'nothing stored for this scope: no lock, parked waiter or artifact (if there should be, check the scope, --prefix and --namespace: fire-once doctor',
      );
    });

    it('gives a scope with a control character in a form a shell reads back, beside the escaped one', async () => {
      const { prefix, guard } = fresh('cli-inspect-control');
      const scope = 'a:b{c}d\ne';
      const first = await guard.acquire({ scope, step: 'summarise', jobType: 'summary' });
      if (first.kind !== 'acquired') throw new Error(first.kind);
      await guard.commit(first.lease, Buffer.from('r'));
      const run = await cli(['inspect', scope, '--prefix', prefix]);
      const form = /^scope "a:b\{c\}d\\ne" \(in a shell: (\$'[^']*')\) in namespace/.exec(run.stdout)?.[1];
      if (form === undefined) throw new Error(`no shell form in:\n${run.stdout}`);
      expect(execFileSync('bash', ['-c', `printf '%s' ${form}`], { encoding: 'utf8' })).toBe(scope);
      expect(run.stdout).toContain('artifact of job type "summary": present');
    });
  });

  describe('release', () => {
    it('refuses without --force (exit 2), then force-releases, records release-forced, and the next acquire dispatches with a higher fencing token', async () => {
      const { prefix, guard } = fresh('cli-release');
      const target = { scope: 'session-stuck', step: 'dispatch', jobType: 'job', holder: 'wf-crashed run-1 1' };
      const first = await guard.acquire(target);
      if (first.kind !== 'acquired') throw new Error(first.kind);

      const dry = await cli(['release', 'session-stuck', '--step', 'dispatch', '--prefix', prefix]);
      expect(dry.code).toBe(2);
      expect(dry.stderr).toContain('refusing to release without --force');
      expect(dry.stdout).toContain('wf-crashed run-1 1');
      expect(await redis.exists(first.lease.lockKey)).toBe(1);

      const forced = await cli(['release', 'session-stuck', '--step', 'dispatch', '--prefix', prefix, '--force', '--json']);
      expect(forced.stderr).toBe('');
      expect(forced.code).toBe(0);
      expect(json<Record<string, unknown>>(forced.stdout)).toMatchObject({
        released: true,
        holder: 'wf-crashed run-1 1',
        fencingToken: first.lease.fencingToken,
      });
      expect(await redis.exists(first.lease.lockKey)).toBe(0);
      const entries = await redis.xrange(guard.keys.log(), '-', '+');
      expect(entries.map(([, fields]) => parseEvent(fields))).toEqual([
        expect.objectContaining({
          decision: 'release-forced',
          namespace: 'default',
          scope: 'session-stuck',
          step: 'dispatch',
          holder: holderId(first.lease.token),
          fencingToken: first.lease.fencingToken,
        }),
      ]);

      const next = await guard.acquire({ ...target, holder: 'wf-retry run-2 1' });
      if (next.kind !== 'acquired') throw new Error(next.kind);
      expect(next.lease.fencingToken).toBeGreaterThan(first.lease.fencingToken);
      // The crashed holder's late release is refused: the lock is the new holder's.
      expect((await guard.release(first.lease)).ours).toBe(false);
      // So is its late commit, before and after the new holder's: one result, the new holder's.
      expect(await guard.commit(first.lease, Buffer.from('stale'))).toEqual({ ours: false, stored: false, waiters: [] });
      expect(await redis.exists(first.lease.artifactKey)).toBe(0);
      expect(await guard.commit(next.lease, Buffer.from('newer'))).toMatchObject({ ours: true, stored: true });
      expect(await guard.commit(first.lease, Buffer.from('stale'))).toMatchObject({ ours: false, stored: false });
      const after = await guard.acquire({ ...target, holder: 'wf-later run-1 1' });
      expect(after.kind === 'fast-forward' && after.artifact.toString()).toBe('newer');

      const none = await cli(['release', 'session-other', '--step', 'dispatch', '--prefix', prefix, '--force']);
      expect(none.code).toBe(4);
      expect(none.stderr).toContain('nothing to release');
      // With --json, a script still gets one JSON document on stdout: the error and its exit code.
      const noneJson = await cli(['release', 'session-other', '--step', 'dispatch', '--prefix', prefix, '--force', '--json']);
      expect(noneJson.code).toBe(4);
      expect(JSON.parse(noneJson.stdout)).toEqual({ error: expect.stringContaining('nothing to release'), exitCode: 4 });
    });

    it('--namespace picks whose lock: inspect shows each holder, and release deletes and logs only that namespace', async () => {
      const { prefix, guard } = fresh('cli-release-ns');
      const target = { scope: 'shared-scope', step: 'dispatch', jobType: 'job' };
      const ours = await guard.acquire({ ...target, holder: 'wf-default run 1' });
      const theirs = await guard.acquire({ ...target, namespace: 'tenant-b', holder: 'wf-tenant run 1' });
      if (ours.kind !== 'acquired' || theirs.kind !== 'acquired') throw new Error(`${ours.kind} ${theirs.kind}`);
      const defaultLock = await redis.get(ours.lease.lockKey);

      const inspected = await cli(['inspect', 'shared-scope', '--prefix', prefix, '--namespace', 'tenant-b', '--json']);
      expect(inspected.stdout).toContain('wf-tenant run 1');
      expect(inspected.stdout).not.toContain('wf-default run 1');

      const forced = await cli(['release', 'shared-scope', '--step', 'dispatch', '--prefix', prefix, '--namespace', 'tenant-b', '--force', '--json']);
      expect(forced.code).toBe(0);
      expect(json<Record<string, unknown>>(forced.stdout)).toMatchObject({ released: true, holder: 'wf-tenant run 1' });
      expect(await redis.exists(theirs.lease.lockKey)).toBe(0);
      expect(await redis.get(ours.lease.lockKey)).toBe(defaultLock);
      const logOf = async (namespace: string) =>
        (await redis.xrange(guard.keysFor(namespace).log(), '-', '+')).map(([, fields]) => parseEvent(fields).decision);
      expect(await logOf('tenant-b')).toEqual(['release-forced']);
      expect(await logOf('default')).toEqual([]);
    });
    it('exits 8 (unexpected data), not 5 (changed hands), and deletes nothing, when the lock key holds something this library never writes', async () => {
      const { prefix, guard } = fresh('cli-release-foreign');
      await redis.hset(guard.keys.lock('s-hash', 'dispatch'), 'f', 'v');
      await redis.set(guard.keys.lock('s-string', 'dispatch'), 'not a lock record');
      for (const [scope, what] of [
        ['s-hash', 'a hash'],
        ['s-string', 'an unreadable string'],
      ]) {
        const run = await cli(['release', scope, '--step', 'dispatch', '--prefix', prefix, '--force']);
        expect(run.stderr).toContain(`${guard.keys.lock(scope, 'dispatch')} holds ${what}, not a lock this library writes`);
        expect(run.code).toBe(8);
        expect(await redis.exists(guard.keys.lock(scope, 'dispatch'))).toBe(1);
      }
    });
  });

  describe('invalidate', () => {
    it('refuses without --force (exit 2), then deletes the artifact, records invalidated, and the next invocation runs again', async () => {
      const { prefix, guard } = fresh('cli-invalidate');
      const target = { scope: 'session-done', step: 'summarise', jobType: 'summary' };
      const first = await guard.acquire(target);
      if (first.kind !== 'acquired') throw new Error(first.kind);
      await guard.commit(first.lease, Buffer.from('result')); // the artifact takes over from the lock
      expect((await guard.acquire(target)).kind).toBe('fast-forward');

      const dry = await cli(['invalidate', 'session-done', '--job-type', 'summary', '--prefix', prefix]);
      expect(dry.code).toBe(2);
      expect(await redis.exists(guard.keys.artifact('session-done', 'summary'))).toBe(1);

      // Workers' local artifact caches listen on the prefix's invalidations channel.
      const subscriber = redis.duplicate();
      const published: string[] = [];
      subscriber.on('message', (_channel: string, key: string) => published.push(key));
      await subscriber.subscribe(guard.keys.invalidations());
      const forced = await cli(['invalidate', 'session-done', '--job-type', 'summary', '--prefix', prefix, '--force']);
      await redis.ping();
      expect(published).toEqual([guard.keys.artifact('session-done', 'summary')]);
      expect(forced.stderr).toBe('');
      expect(forced.code).toBe(0);
      expect(forced.stdout).toContain('deleted the artifact of job type "summary"');
      expect(await redis.exists(guard.keys.artifact('session-done', 'summary'))).toBe(0);
      const entries = await redis.xrange(guard.keys.log(), '-', '+');
      expect(entries.map(([, fields]) => parseEvent(fields))).toEqual([
        expect.objectContaining({ decision: 'invalidated', scope: 'session-done', jobType: 'summary' }),
      ]);
      expect((await guard.acquire(target)).kind).toBe('acquired');

      // Nothing left to delete: exit 4, and the caches are told anyway, for a copy Redis no longer has.
      const none = await cli(['invalidate', 'session-done', '--job-type', 'summary', '--prefix', prefix, '--force']);
      await redis.ping();
      subscriber.disconnect();
      expect(none.code).toBe(4);
      expect(none.stderr).toContain('nothing to invalidate; local caches were told to drop any copy');
      expect(published).toEqual([guard.keys.artifact('session-done', 'summary'), guard.keys.artifact('session-done', 'summary')]);
    });

    it("with --namespace, deletes that namespace's artifact and tells its caches, and leaves the same step of another namespace as it is", async () => {
      const { prefix, guard } = fresh('cli-invalidate-namespace');
      const target = { scope: 'session-shared', step: 'summarise', jobType: 'summary' };
      for (const namespace of ['default', 'tenant-b']) {
        const taken = await guard.acquire({ ...target, namespace });
        if (taken.kind !== 'acquired') throw new Error(taken.kind);
        await guard.commit(taken.lease, Buffer.from(`result of ${namespace}`));
      }
      const [ours, theirs] = [guard.keysFor('tenant-b'), guard.keys];
      const subscriber = redis.duplicate();
      const published: [string, string][] = [];
      subscriber.on('message', (channel: string, key: string) => published.push([channel, key]));
      await subscriber.subscribe(ours.invalidations(), theirs.invalidations());
      const run = await cli(['invalidate', target.scope, '--job-type', 'summary', '--prefix', prefix, '--namespace', 'tenant-b', '--force']);
      await redis.ping();
      subscriber.disconnect();
      expect([run.code, run.stderr]).toEqual([0, '']);
      expect(await redis.exists(ours.artifact(target.scope, 'summary'))).toBe(0);
      expect(await redis.get(theirs.artifact(target.scope, 'summary'))).toMatch(/result of default$/);
      expect(published).toEqual([[ours.invalidations(), ours.artifact(target.scope, 'summary')]]);
    });

    // FireOnceCorruptArtifact leaves the key as it is and dispatches nothing: invalidate is the
    // documented way out (docs/operating.md), whatever the key holds, a string or another type.
    it.each([
      ['a string no commit writes', 'not an artifact record'],
      ['a hash', { field: 'value' }],
    ])('deletes %s at the artifact key, the way out of FireOnceCorruptArtifact; the next invocation runs again', async (_what, value) => {
      const { prefix, guard } = fresh('cli-invalidate-corrupt');
      const target = { scope: 'session-bad', step: 'summarise', jobType: 'summary' };
      const key = guard.keys.artifact(target.scope, target.jobType);
      await (typeof value === 'string' ? redis.set(key, value) : redis.hset(key, value));
      await expect(guard.acquire(target)).rejects.toThrow(FireOnceCorruptArtifact);
      const forced = await cli(['invalidate', target.scope, '--job-type', target.jobType, '--prefix', prefix, '--force']);
      expect([forced.code, forced.stderr]).toEqual([0, '']);
      expect(await redis.exists(key)).toBe(0);
      expect((await guard.acquire(target)).kind).toBe('acquired');
    });

    it('says which lock still holds invocations off after the artifact is gone; a committed step has none', async () => {
      const { prefix, guard } = fresh('cli-invalidate-lock');
      // External-artifact mode: the job wrote keys.external(); the dispatch's lock is held, not committed.
      const external = { scope: 's', step: 'dispatch', jobType: 'report', externalArtifactKey: guard.keys.external('s', 'report') };
      const held = await guard.acquire(external, { lockTtlMs: 60_000 });
      if (held.kind !== 'acquired') throw new Error(held.kind);
      await redis.set(guard.keys.external('s', 'report'), 'written by the job');
      const run = await cli(['invalidate', 's', '--job-type', 'report', '--prefix', prefix, '--force']);
      expect(run.code).toBe(0);
      expect(run.stdout).toContain(`deleted the artifact of job type "report" in scope "s": ${guard.keys.external('s', 'report')}`);
      expect(run.stdout).toMatch(/the lock of step "dispatch" still stands/);

      // Result mode: the commit took its lock with it; no note.
      const result = { scope: 's2', step: 'summarise', jobType: 'summary' };
      const first = await guard.acquire(result, { lockTtlMs: 60_000 });
      if (first.kind !== 'acquired') throw new Error(first.kind);
      await guard.commit(first.lease, Buffer.from('r'));
      const committed = await cli(['invalidate', 's2', '--job-type', 'summary', '--prefix', prefix, '--force']);
      expect(committed.code).toBe(0);
      expect(committed.stdout).not.toContain('still stands');
      expect((await guard.acquire(result)).kind).toBe('acquired');
    });

    it("names only the locks of the job type it deletes: another job type's lock in flight is left out, one the log does not place is named with a check first, and a foreign value gets no release command", async () => {
      const { prefix, guard, log } = fresh('cli-invalidate-other-lock');
      const scope = 'shared';
      // In flight in the same scope: a dispatch of job type 'report', one of 'summary' (taken
      // before the summary below was stored) and one the log never saw.
      const dispatched = async (step: string, jobType: string, logged: boolean) => {
        const held = await guard.acquire({ scope, step, jobType }, { lockTtlMs: 60_000 });
        if (held.kind !== 'acquired') throw new Error(held.kind);
        if (logged)
          await record(log, [{ decision: 'dispatched', scope, step, jobType, holder: holderId(held.lease.token), fencingToken: held.lease.fencingToken }]);
      };
      await dispatched('render', 'report', true);
      await dispatched('draft', 'summary', true);
      await dispatched('mystery', 'unknown', false);
      const stored = await guard.acquire({ scope, step: 'summarise', jobType: 'summary' });
      if (stored.kind !== 'acquired') throw new Error(stored.kind);
      await guard.commit(stored.lease, Buffer.from('r'));
      await redis.set(guard.keys.lock(scope, 'junk'), 'no lock record', 'PX', 60_000);

      const run = await cli(['invalidate', scope, '--job-type', 'summary', '--prefix', prefix, '--force']);
      expect([run.code, run.stderr]).toEqual([0, '']);
      const notes = run.stdout.split('\n').filter((line) => line.startsWith('note:'));
      expect(notes).toHaveLength(3);
      expect(run.stdout).not.toContain('"render"');
      expect(notes.find((n) => n.includes('"draft"'))).toMatch(
        /still stands \(.* left\): invocations stay held off until it expires, or release it with: fire-once release shared --step draft --force --redis \S+ --prefix /,
      );
      expect(notes.find((n) => n.includes('"mystery"'))).toMatch(
        /the dispatch log does not say which job type it dispatched: .*Check it with: fire-once inspect shared --step mystery --redis \S+ --prefix \S+; release it with: fire-once release shared --step mystery --force/,
      );
      expect(notes.find((n) => n.includes('"junk"'))).toMatch(/holds an unreadable string, not a lock this library writes .*release refuses it/);
      expect(notes.find((n) => n.includes('"junk"'))).not.toContain('fire-once release');
      // The report lock is untouched, and still held.
      expect((await guard.acquire({ scope, step: 'render', jobType: 'report' })).kind).toBe('held');
    });
    /** The arguments a shell passes to `fire-once` when `line` is pasted into it: a stand-in `fire-once` prints them. */
    function pasted(shell: 'sh' | 'bash', line: string): string[] {
      const bin = mkdtempSync(join(tmpdir(), 'fire-once-paste-'));
      try {
        writeFileSync(join(bin, 'fire-once'), '#!/bin/sh\nprintf \'%s\\0\' "$@"\n', { mode: 0o755 });
        const out = execFileSync(shell, ['-c', line], { encoding: 'utf8', env: { ...process.env, PATH: `${bin}:${process.env.PATH}` } });
        return out.split('\0').slice(0, -1);
      } finally {
        rmSync(bin, { recursive: true, force: true });
      }
    }

    it('names the release command with the --redis, --prefix and --namespace it ran with, quoted for the shell, and that command releases that lock', async () => {
      const { prefix, guard } = fresh('cli-invalidate-paste');
      const cases = [
        // `$HOME`, a command substitution and a quote: single quotes keep all three as they are (POSIX sh).
        { shell: 'sh', scope: "it's $HOME`echo pwned`$(echo pwned)", step: 'dispatch "now"' },
        // A scope that starts with a dash goes after --; a control character is written as $'\012' (bash).
        { shell: 'bash', scope: '-s', step: 'line\nbreak\u001b[2J' },
      ] as const;
      for (const { shell, scope, step } of cases) {
        const ns = guard.keysFor('tenant-b');
        const external = { scope, step, jobType: 'report', externalArtifactKey: ns.external(scope, 'report') };
        const held = await guard.acquire({ ...external, namespace: 'tenant-b' }, { lockTtlMs: 60_000 });
        const bystander = await guard.acquire({ ...external, externalArtifactKey: guard.keys.external(scope, 'report') }, { lockTtlMs: 60_000 });
        if (held.kind !== 'acquired' || bystander.kind !== 'acquired') throw new Error(`${held.kind} ${bystander.kind}`);
        await redis.set(ns.external(scope, 'report'), 'written by the job');

        const run = await runCli(['invalidate', '--job-type', 'report', '--prefix', prefix, '--namespace', 'tenant-b', '--force', '--redis', url, '--', scope]);
        expect(run.code).toBe(0);
        expect(run.stdout.replace(/\n/g, '')).not.toMatch(/\p{Cc}/u);
        const line = /release it with: (.*)$/m.exec(run.stdout)?.[1];
        if (line === undefined) throw new Error(`no release command in ${run.stdout}`);
        const args = pasted(shell, line);
        expect(args.filter((a) => !['--', scope].includes(a)).slice(1)).toEqual([
          '--step',
          step,
          '--force',
          '--redis',
          url,
          '--prefix',
          prefix,
          '--namespace',
          'tenant-b',
        ]);
        expect(args[0]).toBe('release');
        expect(args).toContain(scope);

        const released = await runCli(args);
        expect(released.stderr).toBe('');
        expect(released.code).toBe(0);
        expect(await redis.exists(held.lease.lockKey)).toBe(0);
        expect(await redis.exists(bystander.lease.lockKey)).toBe(1);
      }
    });
  });

  describe('usage and connection errors', () => {
    it.each<[string[], RegExp]>([
      [['bogus'], /unknown command 'bogus'/],
      [[], /Usage: fire-once/],
      [
        ['report', '--since', 'yesterday'],
        /--since must be a duration back from now \(90s, 15m, 1h, 7d\), an ISO 8601 time \(2026-12-07T09:00Z\) or "all" \(got "yesterday"\)/,
      ],
      [['report', '--prefix', 'bad prefix'], /--prefix must be/],
      [['release', 's'], /required option '--step <step>'/],
      [['invalidate', 's'], /required option '--job-type <jobType>'/],
      [['inspect', '  '], /scope must not be empty/],
      [['report', '--redis', 'http://example.invalid'], /--redis must be a redis:\/\/ or rediss:\/\/ URL/],
    ])('exits 2 on bad usage, naming the problem: fire-once %j', async (args, message) => {
      const run = await runCli(args);
      expect(run.code).toBe(2);
      expect(run.stderr).toMatch(message);
    });

    // Against the suite's reachable Redis, so that a value let through shows as what it then does
    // (exit 3 for an instant timeout or a stream ID before 1970, a report of the wrong window),
    // not as a connection failure.
    it.each<[string[], RegExp]>([
      [['report', '--timeout', '30d'], /--timeout must be at most 2147483647 ms/],
      [['inspect', 's', '--timeout', '2147483648ms'], /--timeout must be at most 2147483647 ms/],
      // No artifact is written with a TTL past the options' 365 days: an age derived from one is wrong.
      [['inspect', 's', '--artifact-ttl', '366d'], /--artifact-ttl must be at most 365 days, the longest artifactTtlMs the options accept \(got "366d"\)/],
      [['inspect', 's', '--artifact-ttl', '53w'], /--artifact-ttl must be at most 365 days/],
      [['report', '--since', '1960-01-01'], /--since "1960-01-01" is before 1970-01-01T00:00:00Z/],
      [['report', '--since', '2026-02-30'], /--since "2026-02-30" names a day that does not exist \(2026-02-30\)/],
      [['report', '--since', '2025-04-31T10:00:00Z'], /names a day that does not exist \(2025-04-31\)/],
      // A year mistyped into the future would make an empty window, and a cron check pass.
      [['report', '--since', '2999-01-01'], /--since "2999-01-01" is after Redis's clock \(\d{4}-/],
      [['report', '--limit', ''], /--limit must be a non-negative whole number in decimal digits \(got ""\)/],
      [['report', '--limit', '0x10'], /--limit must be a non-negative whole number in decimal digits \(got "0x10"\)/],
      [['report', '--limit', '1e3'], /--limit must be/],
      [['report', '--limit', '-1'], /--limit must be/],
      [['doctor', '--scan-budget', ''], /--scan-budget must be a positive whole number in decimal digits \(got ""\)/],
      [['doctor', '--scan-budget', '0'], /--scan-budget must be a positive whole number/],
      [['doctor', '--timeout', '30d'], /--timeout must be at most 2147483647 ms/],
      [['doctor', '--acl-user', ''], /--acl-user must name a user \(got ""\)/],
      [['doctor', '--acl-user', ' '], /--acl-user must name a user \(got " "\)/],
      // An option whose value is missing must not take the next option as its value, and an
      // option given twice must not quietly take the last value: both would act on something else.
      [['release', 's', '--step', '--force'], /option --step is missing its value: the next argument, "--force", is an option/],
      [['inspect', 's', '--namespace', '--json'], /option --namespace is missing its value: the next argument, "--json", is an option/],
      [['invalidate', 's', '--job-type', '--', 'x', '--force'], /option --job-type is missing its value: the next argument, "--", is an option/],
      [['report', '--prefix', '-h'], /option --prefix is missing its value: the next argument, "-h", is an option/],
      [['release', 's', '--step', 'a', '--step', 'b', '--force'], /option --step is given more than once \("a", "b"\): give it once/],
      [['inspect', 's', '--namespace=tenant-a', '--namespace', 'tenant-b'], /option --namespace is given more than once \("tenant-a", "tenant-b"\)/],
      [['report', '--limit', '5', '--limit', '7'], /option --limit is given more than once/],
    ])('exits 2 on an out-of-range or malformed value, with Redis reachable: fire-once %j', async (args, message) => {
      const run = await cli(args);
      expect(run.stderr).toMatch(message);
      expect(run.code).toBe(2);
    });

    // docs/operating.md, --json: "A command that fails before printing one prints {"error": …,
    // "exitCode": N} there". A script that passes --json parses stdout, whatever went wrong.
    it.each<[string[], RegExp]>([
      [['report', '--json', '--bogus'], /unknown option '--bogus'/],
      [['release', 's', '--json'], /required option '--step <step>' not specified/],
      [['inspect', '--json'], /missing required argument 'scope'/],
      [['report', 'extra', '--json'], /too many arguments for 'report'/],
      [['report', '--json', '--since'], /option '--since <when>' argument missing/],
      [['bogus', '--json'], /unknown command 'bogus'/],
    ])('with --json, a usage error the argument parser finds prints its JSON document on stdout too: fire-once %j', async (args, message) => {
      const run = await runCli([...args]);
      expect(run.code).toBe(2);
      expect(run.stderr).toMatch(message);
      const printed = JSON.parse(run.stdout) as { error: string; exitCode: number };
      expect(printed).toEqual({ error: expect.stringMatching(message), exitCode: 2 });
      expect(printed.error).not.toMatch(/^error: |run with --help/);
    });

    it('with --json after "--" (a scope), a failure prints no JSON document, as without --json', async () => {
      const run = await runCli(['inspect', '--timeout', 'soon', '--', '--json']);
      expect(run.code).toBe(2);
      expect(run.stderr).toMatch(/--timeout must be a duration/);
      expect(run.stdout).toBe('');
    });

    it('takes a value that starts with two dashes when it is joined to its option by an equals sign', async () => {
      const { prefix, guard } = fresh('cli-dash-value');
      const held = await guard.acquire({ scope: '--scope', step: '--force', jobType: 'summary' });
      if (held.kind !== 'acquired') throw new Error(held.kind);
      const run = await runCli(['inspect', '--redis', url, '--prefix', prefix, '--step=--force', '--json', '--', '--scope']);
      expect(run.stderr).toBe('');
      expect(run.code).toBe(0);
      expect(json<{ scope: string; locks: { step: string; present: boolean }[] }>(run.stdout)).toMatchObject({
        scope: '--scope',
        locks: [{ step: '--force', present: true }],
      });
    });

    it('takes a flag given twice as the flag: --force --force releases, as docs/operating.md says', async () => {
      const { prefix, guard } = fresh('cli-flag-twice');
      const held = await guard.acquire({ scope: 's', step: 'x', jobType: 'summary' });
      if (held.kind !== 'acquired') throw new Error(held.kind);
      const run = await runCli(['release', 's', '--step', 'x', '--force', '--force', '--redis', url, '--prefix', prefix]);
      expect({ code: run.code, stderr: run.stderr }).toEqual({ code: 0, stderr: '' });
      expect(await redis.exists(held.lease.lockKey)).toBe(0);
    });

    it('takes the largest --timeout Node.js can keep, and --limit 0 for every scope', async () => {
      const { prefix, guard } = fresh('cli-arg-edges');
      await redis.xadd(guard.keys.log(), '1-1', 'decision', 'dispatched'); // a log, all of it before the window
      const run = await cli(['report', '--prefix', prefix, '--timeout', '2147483647ms', '--limit', '0']);
      expect(run.stderr).toBe('');
      expect(run.code).toBe(0);
    });

    it('stops quietly when its reader closes the pipe early (`fire-once --help | head`)', async () => {
      const child = spawn(process.execPath, ['--import', 'tsx', join('src', 'cli', 'main.ts'), '--help'], { stdio: ['ignore', 'pipe', 'pipe'] });
      child.stdout.destroy(); // the reader is gone before the CLI writes
      let stderr = '';
      child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
      const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
      expect(stderr).toBe('');
      expect(code).toBe(0);
    });

    it('exits 8 (unexpected data), not 3 (Redis failed), naming the key, when the dispatch log key holds another Redis type', async () => {
      const { prefix, guard } = fresh('cli-foreign-log');
      const lease = await guard.acquire({ scope: 's', step: 'summarise', jobType: 'summary' });
      if (lease.kind !== 'acquired') throw new Error(lease.kind);
      await guard.commit(lease.lease, Buffer.from('result')); // inspect reads the log for its age
      await redis.hset(guard.keys.log(), 'f', 'v');
      for (const args of [['report'], ['inspect', 's']]) {
        const run = await cli([...args, '--prefix', prefix]);
        expect(run.stderr).toContain(`the key ${guard.keys.log()} holds a Redis type this library never writes there`);
        expect(run.code).toBe(8);
      }
      expect(await redis.hgetall(guard.keys.log())).toEqual({ f: 'v' });
    });

    it("exits with the command's own code, not 3 (Redis failed), when an ID reads like a connection error", async () => {
      const { prefix } = fresh('cli-error-words');
      for (const args of [
        ['release', 'ECONNREFUSED', '--step', 'x'],
        ['release', 's', '--step', 'Connection is closed', '--force'],
        ['invalidate', 'Command timed out', '--job-type', 'summary', '--force'],
        // isWrongType reads `: WRONGTYPE` anywhere in a message: this one quotes the scope.
        ['invalidate', 'a: WRONGTYPE', '--job-type', 'summary', '--force'],
      ]) {
        const run = await cli([...args, '--prefix', prefix]);
        expect(run.stderr).toMatch(/^fire-once: no (lock|artifact) /);
        expect(run.code).toBe(4);
      }
    });

    it('never prints the password of a URL it cannot parse, from --redis or REDIS_URL, and names which it was', async () => {
      for (const bad of ['redis://admin:s3cret-u@redis host:6379', 'redis://admin:s3cret-u@[::1:6379', 'redis://:s3cret-u@host:99999/0']) {
        for (const [run, source] of [
          [await runCli(['report', '--redis', bad]), '--redis'],
          [await runCli(['doctor'], { REDIS_URL: bad }), 'REDIS_URL'],
          [await runCli(['release', 's', '--step', 'x', '--force'], { REDIS_URL: bad }), 'REDIS_URL'],
        ] as const) {
          expect(run.stderr).toContain(`fire-once: ${source} must be a redis:// or rediss:// URL (got "redis://***@`);
          expect(run.stderr).not.toContain('s3cret-u');
          expect(run.code).toBe(2);
        }
      }
    });

    it('never prints a password that the URL parser does not see as one, nor one given twice', async () => {
      // These parse, but their password lands in the host, path, query or fragment, which the messages quoted.
      for (const bad of [
        'admin:s3cret-u@localhost:6379',
        'redis:/admin:s3cret-u@localhost:6379',
        'redis://admin:12/s3cret-u@localhost:6379',
        'redis://admin:12?s3cret-u@localhost:6379',
        'redis://admin:12#s3cret-u@localhost:6379',
        // An `@` before the `/`, `?` or `#` too: the parser takes what comes before it for the
        // password and host, and what comes after for the path, query or fragment.
        'redis://admin:s3cret-u@s3cret-u#s3cret-u@localhost:6379',
        'redis://admin:s3cret-u@s3cret-u/s3cret-u@localhost:6379',
        'redis://admin:s3cret-u@s3cret-u?s3cret-u@localhost:6379',
        // A % that starts no escape: ioredis's decodeURIComponent threw an internal error.
        'redis://admin:s3cret-u%zz@localhost:6379',
      ]) {
        const run = await runCli(['report', '--redis', bad]);
        expect(run.stderr).not.toContain('s3cret-u');
        expect(run.stderr).not.toContain('internal error');
        // With its scheme:// intact, the fix is named: percent-encode the character.
        if (bad.startsWith('redis://')) expect(run.stderr).toMatch(/percent-encode it|write a % as %25/);
        expect(run.code).toBe(2);
      }
      const twice = await runCli(['inspect', 's', '--redis', 'redis://admin:s3cret-u@h:1', '--redis', 'redis://admin:s3cret-u@h:2']);
      expect(twice.stderr).toContain('option --redis is given more than once');
      expect(twice.stderr).not.toContain('s3cret-u');
      expect(twice.code).toBe(2);
    });

    it('exits 0 on --help, which lists the exit codes; an unknown command with --help is named, exit 2, not answered with the help', async () => {
      const help = await runCli(['--help']);
      expect(help.code).toBe(0);
      expect(help.stdout).toContain('Exit codes:');
      const typo = await runCli(['reprot', '--help']);
      expect([typo.code, typo.stdout, typo.stderr.replace(/\s+/g, ' ')]).toEqual([
        2,
        '',
        "error: unknown command 'reprot' (Did you mean report?) (run with --help for usage) ",
      ]);
    });

    it("lists in --help the exit codes of docs/operating.md's table, with what sends a command to each", async () => {
      // operating.md: "Also in `fire-once --help`". A user whose command exits 3 for want of an
      // ACL permission, or 2 for a bad ID, reads --help for why.
      const operating = readFileSync(join(__dirname, '..', '..', 'docs', 'operating.md'), 'utf8');
      const table = /### Exit codes\n[\s\S]*?\n\| code \| meaning \|\n\| --- \| --- \|\n((?:\|.*\n)+)/.exec(operating)?.[1] ?? '';
      const documented = [...table.matchAll(/^\| (\d+) \|/gm)].map(([, code]) => code);
      const help = (await runCli(['--help'])).stdout.split('Exit codes:')[1] ?? '';
      expect(documented.length).toBeGreaterThan(8);
      expect([...help.matchAll(/^ {2}(\d+) /gm)].map(([, code]) => code)).toEqual(documented);
      const meanings = new Map(
        help
          .split(/\n(?= {2}\d+ )/)
          .map((entry) => /^\s*(\d+) +([\s\S]*)$/.exec(entry))
          .flatMap((m) => (m === null ? [] : [[Number(m[1]), m[2].replace(/\s+/g, ' ').trim()] as const])),
      );
      const meaning = (code: number) => meanings.get(code) ?? '';
      expect(meaning(3)).toMatch(/ACL permission/);
      expect(meaning(2)).toMatch(/unknown command or option/);
      expect(meaning(2)).toMatch(/invalid ID or prefix/);
      expect(meaning(8)).toMatch(/or not as v2 encodes them/);
    });

    it('exits 3 when Redis is unreachable or refuses the credentials, without printing the password', async () => {
      const port = await refusedPort();
      const down = await runCli(['report', '--redis', `redis://127.0.0.1:${port}`, '--timeout', '2s']);
      expect(down.code).toBe(3);
      expect(down.stderr).toMatch(/cannot use Redis at redis:\/\/127\.0\.0\.1:\d+.*ECONNREFUSED/);

      const u = new URL(url);
      u.username = 'nobody-cli-test';
      u.password = 's3cret-pw';
      const refused = await runCli(['inspect', 's', '--redis', u.toString()]);
      expect(refused.code).toBe(3);
      expect(refused.stderr).toMatch(/WRONGPASS|NOAUTH|invalid username-password/i);
      expect(refused.stderr).not.toContain('s3cret-pw');
    });

    it('exits 3, touching nothing, when the URL names a database the server does not have', async () => {
      const { prefix, guard } = fresh('cli-db-range');
      const target = { scope: 'victim', step: 'summarise', jobType: 'summary' };
      const first = await guard.acquire(target);
      if (first.kind !== 'acquired') throw new Error(first.kind);
      await guard.commit(first.lease, Buffer.from('kept'));
      const u = new URL(url);
      u.pathname = '/99';
      for (const args of [
        ['invalidate', 'victim', '--job-type', 'summary', '--prefix', prefix, '--force'],
        ['inspect', 'victim', '--prefix', prefix],
      ]) {
        const run = await runCli([...args, '--redis', u.toString()]);
        expect(run.stderr).toMatch(/cannot use Redis at redis:\/\/.*\/99: .*DB index is out of range/);
        expect(run.code).toBe(3);
      }
      expect(await redis.getBuffer(guard.keys.artifact('victim', 'summary'))).not.toBeNull();
      expect((await guard.acquire(target)).kind).toBe('fast-forward');
    });

    it("exits 2, naming it, when the URL's database is not a number: ioredis would crash on /abc and read /1x as database 1", async () => {
      const { prefix, guard } = fresh('cli-db-name');
      const target = { scope: 'victim', step: 'summarise', jobType: 'summary' };
      const first = await guard.acquire(target);
      if (first.kind !== 'acquired') throw new Error(first.kind);
      await guard.commit(first.lease, Buffer.from('kept'));
      const u = new URL(url);
      for (const path of ['/abc', '/1x', '/1/2', '/-1']) {
        u.pathname = path;
        for (const command of ['invalidate', 'doctor']) {
          const args = command === 'doctor' ? ['doctor'] : ['invalidate', 'victim', '--job-type', 'summary', '--prefix', prefix, '--force'];
          const run = await runCli([...args, '--redis', u.toString()]);
          expect(run.stderr).toContain(`--redis must name its database as digits (redis://host:port/0), not ${JSON.stringify(path)}`);
          expect(run.code).toBe(2);
        }
      }
      expect((await guard.acquire(target)).kind).toBe('fast-forward');
      u.pathname = '/';
      const root = await runCli(['inspect', 'victim', '--prefix', prefix, '--redis', u.toString()]);
      expect(root.stderr).toBe('');
      expect(root.code).toBe(0);
    });

    it('exits 2, touching nothing, when the URL has a query: ioredis reads it as client options, so ?keyPrefix= acts on other keys than the ones named, and ?db=abc crashes', async () => {
      const { prefix, guard } = fresh('cli-url-query');
      const target = { scope: 'victim', step: 'summarise', jobType: 'summary' };
      const held = await guard.acquire(target);
      if (held.kind !== 'acquired') throw new Error(held.kind);
      // The same lock record at the key ?keyPrefix=<prefix>:shadow: would make the CLI act on.
      const shadow = `${prefix}:shadow:${held.lease.lockKey}`;
      await redis.set(shadow, (await redis.get(held.lease.lockKey))!, 'PX', 60_000);
      for (const query of [`?keyPrefix=${prefix}:shadow:`, '?db=abc', '?password=s3cret-q']) {
        for (const args of [['release', 'victim', '--step', 'summarise', '--prefix', prefix, '--force'], ['doctor']]) {
          const run = await runCli([...args, '--redis', `${url}${url.endsWith('/') ? '' : '/'}${query}`]);
          expect(run.stderr).toContain(`--redis takes no query string: ioredis would read its parameters ("${query.slice(1, query.indexOf('='))}")`);
          expect(run.stderr).not.toContain('s3cret-q');
          expect(run.code).toBe(2);
        }
      }
      expect(await redis.exists(held.lease.lockKey, shadow)).toBe(2);
    });

    it('exits 2 naming the port when it is out of range, not calling the URL no redis:// URL', async () => {
      for (const args of [['report'], ['doctor']]) {
        const run = await runCli([...args, '--redis', 'redis://127.0.0.1:99999']);
        expect(run.stderr).toContain('--redis: port 99999 is out of range (1 to 65535)');
        expect(run.code).toBe(2);
      }
    });

    it('works as an ACL user limited to its prefix, from REDIS_URL', async () => {
      const { prefix, log } = fresh('cli-acl');
      await record(log, [
        { decision: 'dispatched', scope: 's', step: 'x', jobType: 'j', workflowId: 'w1' },
        { decision: 'dispatched', scope: 's', step: 'x', jobType: 'j', workflowId: 'w2' },
      ]);
      const user = `cli-acl-${prefix}`;
      await redis.call('ACL', 'SETUSER', user, 'on', '>acl-pw', `~${prefix}:*`, '+@read', '+@write', '+@connection', '+time', '+evalsha', '+eval', '+info');
      try {
        const u = new URL(url);
        u.username = user;
        u.password = 'acl-pw';
        const run = await runCli(['report', '--prefix', prefix, '--json'], { REDIS_URL: u.toString() });
        expect(run.stderr).toBe('');
        expect(run.code).toBe(1);
        expect(json<{ events: number }>(run.stdout).events).toBe(2);
        const outside = await runCli(['report', '--prefix', `${prefix}-other`], { REDIS_URL: u.toString() });
        expect(outside.code).toBe(3);
        expect(outside.stderr).toMatch(/NOPERM/);
      } finally {
        await redis.call('ACL', 'DELUSER', user);
      }
    });
  });
});
