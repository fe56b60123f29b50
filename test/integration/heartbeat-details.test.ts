import { randomUUID } from 'node:crypto';
import { Context } from '@temporalio/activity';
import { Client, type WorkflowHandle } from '@temporalio/client';
import { ApplicationFailure, defaultPayloadConverter, type Payload } from '@temporalio/common';
import { Worker } from '@temporalio/worker';
import { FireOncePlugin, fireOnce } from '../../src';
import type { DefaultInFlightPolicy } from '../../src/core';
import { waitFor } from '../support/wait';
import { useWorkerFixture } from '../support/temporal';

// Temporal keeps one set of heartbeat details per activity, across its attempts, and every
// heartbeat replaces it: it is where a job records progress for its next attempt to resume from.
// A waiter runs none of the job, so the heartbeats the guard sends for it must carry the details
// an earlier attempt recorded, in the slot ('wait') and parked ('park') alike.
describe('heartbeat details of a waiter', () => {
  const fx = useWorkerFixture('beat-details');

  const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

  it.each<DefaultInFlightPolicy>(['wait', 'park'])(
    "'%s': the details an earlier attempt recorded survive the waiter's heartbeats, and the attempt that dispatches next resumes from them",
    async (onInFlight) => {
      const { redis, prefix } = fx;
      const id = randomUUID();
      const seenKey = `${prefix}:seen:${id}`; // what each dispatch found, recorded outside the guard
      const goKey = (role: string) => `${prefix}:go:${role}:${id}`;
      const activities = {
        progress: fireOnce(
          async (role: string): Promise<string> => {
            const { attempt, heartbeatDetails } = Context.current().info;
            await redis.rpush(seenKey, JSON.stringify({ role, attempt, details: heartbeatDetails ?? null }));
            if (role === 'waiter' && attempt === 1) {
              // Records its progress, then fails (retryably) once told to.
              while (!(await redis.exists(goKey('waiter')))) {
                Context.current().heartbeat({ page: 5 });
                await sleep(100);
              }
              throw new Error('first attempt fails after recording its progress');
            }
            if (role === 'holder') {
              while (!(await redis.exists(goKey('holder')))) {
                Context.current().heartbeat();
                await sleep(100);
              }
              throw ApplicationFailure.nonRetryable('the holder fails', 'HolderFailed');
            }
            return `${role} done`;
          },
          { onConflict: 'ignore' },
        ),
      };
      const taskQueue = `fire-once-beat-details-${id}`;
      const worker = await Worker.create({
        connection: fx.native,
        taskQueue,
        workflowsPath: require.resolve('./fixtures/heartbeat/workflows'),
        activities,
        plugins: [new FireOncePlugin({ redis, keyPrefix: prefix, onInFlight, pollIntervalMs: 100 })],
      });
      const client = new Client({ connection: fx.connection });
      const scope = `session-${id}`;
      const start = (role: string) => client.workflow.start('progressStepRun', { taskQueue, workflowId: `beat-details-${role}-${id}`, args: [scope, role] });
      const seen = async () => (await redis.lrange(seenKey, 0, -1)).map((s) => JSON.parse(s) as { role: string; attempt: number; details: unknown });
      const pending = async (h: WorkflowHandle) => (await h.describe()).raw.pendingActivities?.[0];
      const millis = (t: { seconds?: unknown; nanos?: number | null } | null | undefined) =>
        t ? Number(t.seconds ?? 0) * 1000 + Math.floor((t.nanos ?? 0) / 1e6) : 0;

      const [details, waiterResult, waiterSeen] = await worker.runUntil(async () => {
        const waiter = await start('waiter');
        await waitFor('the waiter to dispatch', async () => (await seen()).some((s) => s.role === 'waiter'));
        const holder = await start('holder');
        await redis.set(goKey('waiter'), '1'); // the waiter's attempt 1 fails; the holder takes the lock over
        await waitFor('the holder to dispatch', async () => (await seen()).some((s) => s.role === 'holder'));
        // The waiter's attempt 2 finds the holder's lock, and waits or parks, heartbeated by the guard.
        await waitFor("a heartbeat of the waiter's attempt 2", async () => {
          const p = await pending(waiter);
          return (p?.attempt ?? 0) >= 2 && millis(p?.lastHeartbeatTime) > millis(p?.lastStartedTime) && millis(p?.lastStartedTime) > 0;
        });
        const payload = (await pending(waiter))?.heartbeatDetails?.payloads?.[0];
        await redis.set(goKey('holder'), '1');
        await holder.result().catch(() => undefined);
        const result = await waiter.result();
        return [payload && defaultPayloadConverter.fromPayload(payload as Payload), result, (await seen()).filter((s) => s.role === 'waiter')];
      });
      expect(details).toEqual({ page: 5 });
      expect(waiterResult).toBe('waiter done');
      // Every dispatch of the waiter after its first found the progress its first recorded.
      expect(waiterSeen.slice(1).map((s) => s.details)).toEqual(waiterSeen.slice(1).map(() => ({ page: 5 })));
    },
  );
});
