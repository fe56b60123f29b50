import { WorkflowFailedError } from '@temporalio/client';
import { FireOnceKeys } from '../../src/core';
import { newScope, useFeatures } from '../support/features';
import { waitFor } from '../support/wait';

// A result over maxArtifactBytes is delivered, not stored, and the lock is kept (docs/how-it-decides.md
// "Size"). Over Temporal's own payload limit (2 MB on the dev server) it cannot be delivered
// either: Temporal fails the attempt, and the retry finds the lock that attempt kept. It waits
// there until lockTtlMs instead of running the job again; a waiter parked on the lock is handed
// the result, which Temporal refuses too, and its run fails.
describe('Temporal features: a result over Temporal’s payload limit', () => {
  const { withWorker } = useFeatures('oversized');

  it('fails the attempt and the parked waiter; the retry waits on the kept lock: the job ran once', () =>
    withWorker(async (ctx) => {
      const scope = newScope('oversized');
      const holder = await ctx.start('oversizedRun', [scope, 1_000]);
      await ctx.started('oversizedJob', scope);
      const waiter = await ctx.start('oversizedRun', [scope, 1_000]);
      const keys = new FireOnceKeys(ctx.prefix);
      await waitFor('the second run to park', async () => (await ctx.redis.llen(keys.waiters(scope, 'oversizedJob'))) === 1);

      await expect(waiter.result()).rejects.toBeInstanceOf(WorkflowFailedError);
      await waitFor('the holder’s second attempt', async () => ((await holder.describe()).raw.pendingActivities?.[0]?.attempt ?? 0) >= 2);
      const pending = (await holder.describe()).raw.pendingActivities?.[0];
      expect(pending?.lastFailure?.message).toBeTruthy(); // the first attempt failed: its result was refused
      expect(await ctx.count('oversizedJob', scope)).toBe(1);
      expect(await ctx.redis.pttl(keys.lock(scope, 'oversizedJob'))).toBeGreaterThan(60_000); // kept for lockTtlMs (15 min)
      await holder.terminate('the retry would wait out lockTtlMs');
    }));
});
