/**
 * The strategies the bench compares, the phases invocations arrive in, and what the seed
 * predicts for each strategy in each phase.
 */

/** Every strategy, in the order the bench runs and prints them. */
export const STRATEGIES = ['none', 'artifact-only', 'lock-only', 'release-on-any-resolution', 'fire-once', 'temporal-native'] as const;

/** One strategy's name. */
export type StrategyName = (typeof STRATEGIES)[number];

/**
 * When an invocation arrives:
 * - `open`: the first invocation, whose dispatch puts the job in flight;
 * - `a`: a burst while that job is in flight;
 * - `b`: after the job resolved, before its artifact is written;
 * - `c`: after the lock TTL expired and the job long succeeded.
 */
export type Phase = 'open' | 'a' | 'b' | 'c';

/** The phases whose dispatches are duplicates (the `open` one is the job itself). */
export const DUPLICATE_PHASES = ['a', 'b', 'c'] as const;

/** A phase whose dispatches are duplicates. */
export type DuplicatePhase = (typeof DUPLICATE_PHASES)[number];

/** What the seed predicts for one strategy. */
export interface Prediction {
  /** Phases that must show at least one duplicate dispatch: the strategy's predicted failure. */
  readonly duplicatesIn: readonly DuplicatePhase[];
  /** One line on why, printed with the table. */
  readonly why: string;
}

/**
 * The seed's claims, one per strategy. `fire-once` predicts no duplicate anywhere: exactly one
 * dispatch in all; so does `temporal-native`, Temporal's own answer (no Redis). Every other
 * strategy predicts duplicates in exactly the phases listed.
 */
export const PREDICTIONS: Readonly<Record<StrategyName, Prediction>> = Object.freeze({
  none: { duplicatesIn: ['a', 'b', 'c'], why: 'no guard: every invocation dispatches' },
  'artifact-only': {
    duplicatesIn: ['a', 'b'],
    why: 'no lock: nothing covers the time from dispatch to artifact, so (a) and (b) dispatch again',
  },
  'lock-only': {
    duplicatesIn: ['c'],
    why: 'no artifact check: once the lock TTL ran out, (c) cannot tell the job already succeeded',
  },
  'release-on-any-resolution': {
    duplicatesIn: ['b'],
    why: 'lock released when the job resolved: (b) lands with neither lock nor artifact',
  },
  'fire-once': {
    duplicatesIn: [],
    why: 'artifact guard + lock released only on failure: one dispatch in all',
  },
  'temporal-native': {
    duplicatesIn: [],
    why: 'job workflow job:{scope}:{step}, USE_EXISTING + ALLOW_DUPLICATE_FAILED_ONLY: runs attach to it or read its result; no Redis',
  },
});

/** Strategies that must dispatch exactly once in every run: the bench fails otherwise. */
export function mustFireOnce(strategy: StrategyName): boolean {
  return PREDICTIONS[strategy].duplicatesIn.length === 0;
}

/** The scope (chat session) a strategy's invocations share. */
export function sessionOf(strategy: StrategyName): string {
  return `session-${strategy}`;
}

/** Parse a comma-separated list of strategy names; throws naming the bad one. */
export function parseStrategies(list: string): StrategyName[] {
  const names = list
    .split(',')
    .map((name) => name.trim())
    .filter((name) => name.length > 0);
  for (const name of names) {
    if (!(STRATEGIES as readonly string[]).includes(name)) {
      throw new Error(`--strategies: unknown strategy ${JSON.stringify(name)} (known: ${STRATEGIES.join(', ')})`);
    }
  }
  if (names.length === 0) throw new Error('--strategies must name at least one strategy');
  return names as StrategyName[];
}
