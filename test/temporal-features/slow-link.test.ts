import { Worker } from '@temporalio/worker';
import { Redis } from 'ioredis';
import { FireOncePlugin } from '../../src';
import { FireOnceKeys, parseEvent } from '../../src/core';
import { newScope, oneResult, useFeatures, type FeatureContext } from '../support/features';
import { slowLink, type SlowLink } from '../support/slow-link';
import { guardedActivities } from './fixtures/activities';
import { startHandWiredWorker } from './fixtures/hand-wired';

// python/tests/test_log_flush.py's scenario on the TypeScript side: a slow link to Redis, and the
// worker's Redis client closed as soon as the worker has stopped, right after its last guarded
// activity. The dispatch log sends its batches in the background; the stream (XRANGE) must still
// hold every decision. A worker here takes longer to stop than Python's, so 300 ms late replies
// would be answered before any close: the link turns slow (3 s a reply) when the last batch
// (`committed`) goes out, longer than a worker takes to stop, shorter than `storeTimeoutMs`.
// Without the flush of either wiring, that batch is cut off. Dispatches are counted by the job body.

const REPLY_DELAY_MS = 3_000;

describe('behind a slow link, a worker closed right after its last activity', () => {
  const { context } = useFeatures('slowlink');
  let link: SlowLink;

  beforeAll(async () => {
    link = await slowLink(process.env.REDIS_URL!, REPLY_DELAY_MS, 'committed');
  });
  afterAll(async () => link.close());

  /** The decisions the stream holds for `scope`, read past the link. */
  async function logged(ctx: FeatureContext, scope: string): Promise<string[]> {
    const entries = await ctx.redis.xrange(new FireOnceKeys(ctx.prefix).log(), '-', '+');
    return entries.map(([, fields]) => parseEvent(fields)).flatMap((e) => (e.scope === scope ? [e.decision] : []));
  }

  it('wired by hand and closed as docs/usage.md says: every decision is in the log, none unanswered or dropped', async () => {
    const { ctx, base } = context();
    const wired = await startHandWiredWorker({
      redisUrl: link.url,
      temporalAddress: process.env.TEMPORAL_ADDRESS!,
      taskQueue: ctx.taskQueue,
      keyPrefix: ctx.prefix,
      workflows: { workflowBundle: base.workflowBundle },
    });
    const scope = newScope('hand');
    const result = await wired.worker.runUntil(async () => (await ctx.start('dispatchRun', [scope, 0])).result());
    expect(await wired.close()).toBe(0); // flush(10_000): every entry answered before redis.quit()
    oneResult([result], scope);
    expect({ dropped: wired.log.dropped, decisions: await logged(ctx, scope), dispatches: await ctx.count('dispatchJob', scope) }).toEqual({
      dropped: 0,
      decisions: ['dispatched', 'committed'],
      dispatches: 1,
    });
  });

  it('with the plugin, its client disconnected as soon as run() resolves: every decision is in the log', async () => {
    const { ctx, base } = context();
    const slow = new Redis(link.url);
    const plugin = new FireOncePlugin({ redis: slow, keyPrefix: ctx.prefix, pollIntervalMs: 50 });
    const worker = await Worker.create({
      connection: base.connection,
      taskQueue: ctx.taskQueue,
      workflowBundle: base.workflowBundle,
      activities: guardedActivities(ctx.redis, ctx.prefix), // counted past the link
      plugins: [plugin],
    });
    const scope = newScope('plugin');
    const result = await worker.runUntil(async () => (await ctx.start('dispatchRun', [scope, 0])).result());
    const owed = link.owed(); // replies Redis gave that the worker had not yet had when run() resolved
    slow.disconnect(); // abruptly: whatever the plugin had not waited for is cut off
    oneResult([result], scope);
    expect({ owed, dropped: plugin.dispatchLog?.dropped, decisions: await logged(ctx, scope), dispatches: await ctx.count('dispatchJob', scope) }).toEqual({
      owed: 0,
      dropped: 0,
      decisions: ['dispatched', 'committed'],
      dispatches: 1,
    });
  });
});
