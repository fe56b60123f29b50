import { join } from 'node:path';
import { checkClaim } from '../../sample-workflows/demo';
import { connectRedis, deletePrefix, testPrefix } from '../support/redis';
import { runCli } from './run-cli';
import { runScript, type ScriptRun } from '../support/scripts';

/** Run `npm run demo`'s script as a child process; resolve its exit code and output. */
function runDemo(env: Record<string, string>): Promise<ScriptRun> {
  return runScript(join('sample-workflows', 'demo.ts'), [], env, 280_000);
}

// `npm run demo` with REDIS_URL set leaves both dispatch logs behind; the CLI's report then finds
// the unguarded run's duplicate and none in the guarded run's log.
// Spawns CLI processes (and, for the demo, a worker and a Temporal bundle); slow on a loaded 2-core machine.
jest.setTimeout(300_000);

// The claim that makes `npm run demo` exit 1 (demo.ts returns 1 when this lists a problem): a
// burst the guard failed to hold to one dispatch, or an unguarded one that did not duplicate.
describe("the demo's claim check", () => {
  const row = (strategy: 'unguarded' | 'guarded', dispatches: number) => ({ strategy, invocations: 8, dispatches, wallMs: 50 });
  it.each([
    [8, 1, []],
    [1, 1, ['unguarded dispatched 1 time(s); expected more than 1']],
    [8, 2, ['guarded dispatched 2 time(s); expected exactly 1']],
    [8, 0, ['guarded dispatched 0 time(s); expected exactly 1']],
  ])('unguarded %i, guarded %i dispatches: %j', (unguarded, guarded, problems) => {
    expect(checkClaim([row('unguarded', unguarded), row('guarded', guarded)])).toEqual(problems);
  });
});

describe('the demo feeds `fire-once report`', () => {
  const base = testPrefix('demo');
  const redis = connectRedis();

  afterAll(async () => {
    for (const strategy of ['unguarded', 'guarded']) await deletePrefix(redis, `${base}-${strategy}`);
    await redis.quit();
  });

  it('unguarded: the report flags the session with its 8 dispatches; guarded: none', async () => {
    const demo = await runDemo({ DEMO_KEY_PREFIX: base, REDIS_URL: process.env.REDIS_URL!, TEMPORAL_ADDRESS: process.env.TEMPORAL_ADDRESS! });
    expect({ code: demo.code, stderr: demo.stderr }).toEqual({ code: 0, stderr: '' });
    expect(demo.stdout).toMatch(/│ unguarded │ 8 +│ 8 +│/);
    expect(demo.stdout).toMatch(/│ guarded +│ 8 +│ 1 +│/);
    expect(demo.stdout).toContain(
      `npx fire-once report --prefix ${base}-unguarded flags the session; npx fire-once report --prefix ${base}-guarded shows none`,
    );
    // Only the two dispatch logs and the two protocol markers are left behind.
    const left: string[] = [];
    let cursor = '0';
    do {
      const [next, keys] = await redis.scan(cursor, 'MATCH', `${base}-*`, 'COUNT', 1_000);
      left.push(...keys);
      cursor = next;
    } while (cursor !== '0');
    expect(left.sort()).toEqual([
      `${base}-guarded:protocol`,
      `${base}-guarded:v3:default:log`,
      `${base}-unguarded:protocol`,
      `${base}-unguarded:v3:default:log`,
    ]);

    const redisUrl = process.env.REDIS_URL!;
    const unguarded = await runCli(['report', '--prefix', `${base}-unguarded`, '--json'], { REDIS_URL: redisUrl });
    expect(unguarded.code).toBe(1);
    const duplicates = (
      JSON.parse(unguarded.stdout) as { duplicates: { scope: string; step: string; dispatches: { workflowId: string; runId: string; outcome: string }[] }[] }
    ).duplicates;
    expect(duplicates).toHaveLength(1);
    expect(duplicates[0].step).toBe('dispatch-summary');
    expect(duplicates[0].dispatches).toHaveLength(8);
    expect(new Set(duplicates[0].dispatches.map((d) => d.runId)).size).toBe(8);
    expect(duplicates[0].dispatches.every((d) => d.workflowId.startsWith(`${duplicates[0].scope}-msg-`) && d.outcome === 'observe-only')).toBe(true);

    const guarded = await runCli(['report', '--prefix', `${base}-guarded`, '--json'], { REDIS_URL: redisUrl });
    expect(guarded.code).toBe(0);
    const report = JSON.parse(guarded.stdout) as { duplicates: unknown[]; byJobType: { counts: Record<string, number> }[] };
    expect(report.duplicates).toEqual([]);
    expect(report.byJobType[0].counts).toEqual({ dispatched: 1, 'in-flight-skipped': 7 });
  });
});
