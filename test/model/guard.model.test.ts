import fc from 'fast-check';
import { Redis } from 'ioredis';
import { FireOnceGuard } from '../../src';
import { connectRedis, deletePrefix, testPrefix } from '../support/redis';
import { GUARD_OPTIONS, allCommands, type RealSystem } from './commands';
import { emptyModel, type ProtocolModel } from './protocol-model';

/**
 * Model-based test of the core protocol: random sequences of acquire / commit / fail (release) /
 * extend / expire / crash, run against FireOnceGuard on the suite's real Redis and against the
 * pure model in protocol-model.ts, compared after every command (see verifyRedis).
 *
 * Expiry is simulated honestly but not by waiting: the guard's TTLs are long (10 min, 1 day),
 * and an `expire` command brings one key's expiry forward with PEXPIRE 1, then waits until Redis
 * itself reports the key gone. A `crash` is a holder that never calls Redis again.
 *
 * Replay a failure with the seed and path it prints:
 *   FIRE_ONCE_MODEL_SEED=<seed> FIRE_ONCE_MODEL_PATH=<path> npx jest test/model
 */
const NUM_RUNS = 250;
const MAX_COMMANDS = 120;
const MIN_TOTAL_COMMANDS = 10_000;
const EXERCISED = [
  'fast-forward',
  'acquired',
  'held',
  'held by the same holder',
  'acquired again after an earlier holder',
  'commit',
  'late commit',
  'refused commit',
  'release',
  'stale release refused, lock held by another',
  'stale release refused, no lock',
  'extend',
  'stale extend refused',
  'crash',
];

describe('fire-once protocol, model-based (fast-check, real Redis)', () => {
  let redis: Redis;
  let peer: Redis;
  let base: string;

  beforeAll(() => {
    redis = connectRedis();
    peer = connectRedis();
    base = testPrefix('model');
  });
  afterAll(async () => {
    await deletePrefix(redis, base);
    await Promise.all([redis.quit(), peer.quit()]);
  });

  /** Run the model test; resolves the number of commands run, or rejects with a replayable report. */
  async function runModelTest(options: { numRuns: number; flaws?: ProtocolModel['flaws']; seed?: number; path?: string }) {
    const executed = { count: 0 };
    const stats: Record<string, number> = {};
    let run = 0;
    const property = fc.asyncProperty(fc.commands(allCommands, { maxCommands: MAX_COMMANDS, size: 'max' }), async (cmds) => {
      const prefix = `${base}:r${run++}`;
      const guards = [redis, peer].map((client) => new FireOnceGuard({ redis: client, keyPrefix: prefix, ...GUARD_OPTIONS }));
      const real: RealSystem = { redis, guards, leases: [], tokens: new Set(), executed, stats };
      try {
        await fc.asyncModelRun(() => ({ model: emptyModel(options.flaws), real }), cmds);
        await expectOnlyKnownKeys(redis, prefix);
      } finally {
        await deletePrefix(redis, prefix);
      }
    });
    const details = await fc.check(property, {
      numRuns: options.numRuns,
      ...(options.seed === undefined ? {} : { seed: options.seed }),
      ...(options.path === undefined ? {} : { path: options.path }),
    });
    if (details.failed) {
      throw new Error(
        `the guard diverged from the model (seed ${details.seed}, path ${details.counterexamplePath}); replay with ` +
          `FIRE_ONCE_MODEL_SEED=${details.seed} FIRE_ONCE_MODEL_PATH=${details.counterexamplePath} npx jest test/model\n` +
          `${fc.defaultReportMessage(details)}\n${String(details.errorInstance)}`,
      );
    }
    return { count: executed.count, stats };
  }

  it(`agrees with the model over ≥ ${MIN_TOTAL_COMMANDS} random commands`, async () => {
    const seed = process.env.FIRE_ONCE_MODEL_SEED;
    const replaying = seed !== undefined;
    const { count, stats } = await runModelTest({
      numRuns: replaying ? 1 : NUM_RUNS,
      ...(replaying ? { seed: Number(seed), path: process.env.FIRE_ONCE_MODEL_PATH } : {}),
    });
    process.stdout.write(`model test: ${count} commands run; ${JSON.stringify(stats)}\n`);
    if (replaying) return;
    expect(count).toBeGreaterThanOrEqual(MIN_TOTAL_COMMANDS);
    // Every interesting case came up, many times: the agreement is not for lack of trying.
    expect(EXERCISED.filter((what) => (stats[what] ?? 0) < 25).map((what) => `${what}: ${stats[what] ?? 0} times`)).toEqual([]);
  });

  it('catches a release that ignores the token (the model test can fail, and says how to replay)', async () => {
    // Up to 2,000 runs; fast-check stops at the first divergence, usually within a few dozen.
    const err = await runModelTest({ numRuns: 2_000, flaws: { releaseIgnoresToken: true } }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(Error);
    const message = (err as Error).message;
    expect(message).toMatch(/FIRE_ONCE_MODEL_SEED=-?\d+ FIRE_ONCE_MODEL_PATH=[\d:]+/);
    expect(message).toMatch(/seed: -?\d+, path: "[\d:]+"/); // fast-check's own report, with its seed and path
    expect(message).toMatch(/divergence in lock .* model expects "no lock"/);
  });
});

/** At the end of a run, the run's prefix holds only locks and artifacts. */
async function expectOnlyKnownKeys(redis: Redis, prefix: string): Promise<void> {
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 1000);
    for (const key of keys) {
      if (!/^[^{]*:v3:\{default\/[^{}]*\}:(l|a):[A-Za-z0-9._~%-]+$/.test(key)) throw new Error(`unexpected key after a run: ${key}`);
    }
    cursor = next;
  } while (cursor !== '0');
}
