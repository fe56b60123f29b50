import { Worker, type ReplayWorkerOptions } from '@temporalio/worker';
import { DeterminismViolationError } from '@temporalio/workflow';
import type { Redis } from 'ioredis';
import { FireOncePlugin } from '../../src';
import { connectRedis, testPrefix } from '../support/redis';
import { RECORDED_RELEASES } from '../support/release-build';
import { COMPAT_WORKFLOWS } from './bundle';
import { recordedHistories, type Recorded } from './histories';

// Histories that each earlier release recorded (test/compat/record-histories.ts, from the
// release's commit) replay on HEAD: what a fleet upgraded one worker at a time does to every open
// workflow.

/** Every shape each release recorded: a missing file fails the test, as a failed replay would. */
const MAIN_SHAPES = [
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
/**
 * 0.9.0 on: a local activity's wait handed off as its worker stopped, and one cancelled across the
 * hand-off (0.9.0: no patch marker; 0.10.0: under the patch temporal-fire-once-hand-off-cancel, its marker recorded).
 */
const HAND_OFF_SHAPES = ['local-cancelled-handed-off', 'local-handed-off'];
const WITH_HAND_OFF = [...MAIN_SHAPES, ...HAND_OFF_SHAPES].sort();
const SHAPES: Record<string, readonly string[]> = { '0.8.0': MAIN_SHAPES, '0.9.0': WITH_HAND_OFF, '0.10.0': WITH_HAND_OFF };

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

describe.each(RECORDED_RELEASES.map((r) => r.version))('histories recorded by %s', (version) => {
  let redis: Redis;
  const histories = recordedHistories(version, 'ts');
  const withPlugin = (): ReplayWorkerOptions => ({
    workflowsPath: COMPAT_WORKFLOWS,
    plugins: [new FireOncePlugin({ redis, keyPrefix: testPrefix('compat-replay') })],
  });
  beforeAll(() => {
    redis = connectRedis();
  });
  afterAll(() => redis.quit());

  it("replay on HEAD's plugin and workflow interceptor, with no nondeterminism: each shape", async () => {
    expect(histories.map((h) => h.name)).toEqual(SHAPES[version]);
    const results = await replay(withPlugin(), histories);
    expect(results.filter(({ error }) => error !== undefined)).toEqual([]);
  });

  it('the control: a recorded history that no longer matches the code fails to replay', async () => {
    const fires = recordedHistories(version, 'ts').find((h) => h.name === 'fires')!; // a copy of its own
    const scheduled = fires.history.events!.find((e) => e.activityTaskScheduledEventAttributes)!.activityTaskScheduledEventAttributes!;
    scheduled.activityType = { name: 'anotherJob' };
    const [{ error }] = await replay(withPlugin(), [fires]);
    expect(error).toBeInstanceOf(DeterminismViolationError);
  });
});

describe('the patch the recorded histories pin', () => {
  /** The patch IDs in the `core_patch` markers of a release's recorded `local-cancelled-handed-off`, TypeScript and Python. */
  const patches = (version: string) =>
    (['ts', 'python'] as const).map((language) =>
      (recordedHistories(version, language).find((h) => h.name === 'local-cancelled-handed-off')!.history.events ?? []).flatMap((e) => {
        const marker = e.markerRecordedEventAttributes;
        if (marker?.markerName !== 'core_patch') return [];
        const data = marker.details?.['patch-data']?.payloads?.[0]?.data;
        return [(JSON.parse(Buffer.from(data!).toString('utf8')) as { id: string }).id];
      }),
    );

  it("0.9.0's cancelled hand-off holds no patch marker, 0.10.0's holds temporal-fire-once-hand-off-cancel's, in both languages", () => {
    expect(patches('0.9.0')).toEqual([[], []]);
    expect(patches('0.10.0')).toEqual([['temporal-fire-once-hand-off-cancel'], ['temporal-fire-once-hand-off-cancel']]);
  });
});
