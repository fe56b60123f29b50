import { UnexpectedRunError, type GuardUnderTest } from './guards';
import { CommandCounter } from './round-trips';

/** Round trips per decision on each path, as means over the samples, and the commands seen. */
export interface RoundTrips {
  /** From the decision's start until the dispatch starts: artifact check plus lock. */
  readonly acquire: number;
  /** A whole decision that finds the artifact and does not dispatch. */
  readonly fastForward: number;
  /** After a successful dispatch: storing the artifact (and whatever the lock needs). */
  readonly commit: number;
  /** After a failed dispatch: giving the lock back. */
  readonly release: number;
  /** The commands of one warm sample of each path, e.g. `['get', 'evalsha']`. */
  readonly commands: Readonly<Record<Path, readonly string[]>>;
  /**
   * The commands of the first, uncounted sample on the connection: a script's first use may
   * cost an extra `NOSCRIPT` round trip, or go out as a full `EVAL`.
   */
  readonly coldCommands: Readonly<Record<Path, readonly string[]>>;
}

type Path = 'acquire' | 'fastForward' | 'commit' | 'release';

class PlannedFailure extends Error {
  override readonly name = 'PlannedFailure';
}

/**
 * Count, through ioredis' command hook, the round trips each path of one guard takes: `samples`
 * decisions per path, one at a time, after one uncounted cold sample. Also checks the guard
 * behaves: a committed step fast-forwards, and a failed step runs again once its lock is given
 * back.
 *
 * @example
 * ```ts
 * import { Redis } from 'ioredis';
 * import { countRoundTrips } from './count-round-trips';
 * import { createOurs } from './guards/ours';
 * void countRoundTrips(createOurs(new Redis({ lazyConnect: true }), 'bench'), 'rt', 'payload');
 * ```
 */
export async function countRoundTrips(guard: GuardUnderTest, scopePrefix: string, payload: string, samples = 20): Promise<RoundTrips> {
  const counter = new CommandCounter();
  const totals: Record<Path, number> = { acquire: 0, fastForward: 0, commit: 0, release: 0 };
  const cold: Record<Path, string[]> = { acquire: [], fastForward: [], commit: [], release: [] };
  const warm: Record<Path, string[]> = { acquire: [], fastForward: [], commit: [], release: [] };
  const take = (path: Path, from: number, to: number, i: number) => {
    if (i === 0) cold[path] = counter.between(from, to);
    else totals[path] += to - from;
    if (i === 1) warm[path] = counter.between(from, to);
  };
  counter.start();
  try {
    for (let i = 0; i <= samples; i++) {
      const ok = { scope: `${scopePrefix}-ok-${i}`, step: 'dispatch' };
      const marks: number[] = [counter.mark()];
      const fired = await guard.dispatch(ok, async () => {
        marks.push(counter.mark());
        marks.push(counter.mark());
        return payload;
      });
      marks.push(counter.mark());
      if (fired.kind !== 'ran') throw new Error(`${guard.name}: a fresh step was ${fired.kind}, not run`);
      take('acquire', marks[0], marks[1], i);
      take('commit', marks[2], marks[3], i);

      const ffStart = counter.mark();
      const again = await guard.dispatch(ok, () => Promise.reject(new UnexpectedRunError(`${guard.name} ran a committed step again`)));
      if (again.kind !== 'fast-forward' || again.value !== payload) throw new Error(`${guard.name}: a committed step was ${again.kind}`);
      take('fastForward', ffStart, counter.mark(), i);

      const bad = { scope: `${scopePrefix}-fail-${i}`, step: 'dispatch' };
      const failStart = counter.mark();
      let failedAt = -1;
      await guard
        .dispatch(bad, () => {
          failedAt = counter.mark();
          return Promise.reject(new PlannedFailure('planned'));
        })
        .then(
          () => Promise.reject(new Error(`${guard.name}: a failed dispatch resolved`)),
          (err: unknown) => (err instanceof PlannedFailure ? undefined : Promise.reject(err)),
        );
      take('release', failedAt, counter.mark(), i);
      if (failedAt < failStart) throw new Error(`${guard.name}: the failing dispatch never ran`);
      const retried = await guard.dispatch(bad, async () => payload);
      if (retried.kind !== 'ran') throw new Error(`${guard.name}: a step whose dispatch failed was ${retried.kind} on retry, not run`);
    }
  } finally {
    counter.stop();
  }
  return {
    acquire: totals.acquire / samples,
    fastForward: totals.fastForward / samples,
    commit: totals.commit / samples,
    release: totals.release / samples,
    commands: warm,
    coldCommands: cold,
  };
}
