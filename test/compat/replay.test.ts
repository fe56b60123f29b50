import { Worker, type ReplayWorkerOptions } from '@temporalio/worker';
import { DeterminismViolationError } from '@temporalio/workflow';
import type { Redis } from 'ioredis';
import { FireOncePlugin } from '../../src';
import { connectRedis, testPrefix } from '../support/redis';
import { COMPAT_WORKFLOWS } from './bundle';
import { recordedHistories, type Recorded } from './histories';

// Histories that 0.8.0 recorded (test/compat/record-histories.ts, from the release's commit)
// replay on HEAD: what a fleet upgraded one worker at a time does to every open workflow.

/** Every shape 0.8.0 recorded: a missing file fails the test, as a failed replay would. */
const SHAPES = [
  'child',
  'continue-as-new-first',
  'continue-as-new-last',
  'fast-forwards',
  'fires',
  'local-beside-remote',
  'local-holder',
  'local-retried',
  'local-waiter',
  'parent',
  'parked-holder',
  'parked-waiter',
  'retried',
];

/** Replay `histories`: each one's name and error (`undefined`: replayed with no nondeterminism), in order. */
async function replay(options: ReplayWorkerOptions, histories: readonly Recorded[]): Promise<{ name: string; error: unknown }[]> {
  const results: { name: string; error: unknown }[] = [];
  for await (const { workflowId, error } of Worker.runReplayHistories({ ...options, replayName: 'fire-once-compat' }, histories)) {
    const recorded = histories[results.length]!; // replayed in the order given
    expect(workflowId).toBe(recorded.workflowId);
    results.push({ name: recorded.name, error });
  }
  expect(results).toHaveLength(histories.length);
  return results;
}

describe('histories recorded by 0.8.0', () => {
  let redis: Redis;
  const histories = recordedHistories('0.8.0', 'ts');
  const withPlugin = (): ReplayWorkerOptions => ({
    workflowsPath: COMPAT_WORKFLOWS,
    plugins: [new FireOncePlugin({ redis, keyPrefix: testPrefix('compat-replay') })],
  });
  beforeAll(() => {
    redis = connectRedis();
  });
  afterAll(() => redis.quit());

  it("replay on HEAD's plugin and workflow interceptor, with no nondeterminism: each shape", async () => {
    expect(histories.map((h) => h.name)).toEqual(SHAPES);
    const results = await replay(withPlugin(), histories);
    expect(results.filter(({ error }) => error !== undefined)).toEqual([]);
  });

  it('the control: a recorded history that no longer matches the code fails to replay', async () => {
    const fires = recordedHistories('0.8.0', 'ts').find((h) => h.name === 'fires')!; // a copy of its own
    const scheduled = fires.history.events!.find((e) => e.activityTaskScheduledEventAttributes)!.activityTaskScheduledEventAttributes!;
    scheduled.activityType = { name: 'anotherJob' };
    const [{ error }] = await replay(withPlugin(), [fires]);
    expect(error).toBeInstanceOf(DeterminismViolationError);
  });
});
