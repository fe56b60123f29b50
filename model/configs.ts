/**
 * What `npm run model` checks: the real protocol in both artifact modes (safety exhaustively at
 * N = 3, liveness under weak fairness, safety by bitstate search at N = 5), and each weaker
 * strategy, which must fail the property named in `fails`.
 */

/** One spin run: how to generate, compile and run pan, and what it must find. */
export interface ModelConfig {
  readonly name: string;
  /** `-D` switches for spin (model/fire-once.pml's header lists them). */
  readonly defines: readonly string[];
  /** `-D` switches for the C compiler of pan. */
  readonly cflags: readonly string[];
  readonly panArgs: readonly string[];
  /** `undefined`: no error may be found. Otherwise the violations the trail may end in. */
  readonly fails?: readonly Violation[];
}

/** How a trail ends: the property the model's printf names, or an acceptance cycle. */
export type Violation =
  'no duplicate' | 'strict no duplicate' | 'no lost result' | 'release safety' | 'fencing' | 'one result' | 'no stranded waiter' | 'acceptance cycle';

/** Exhaustive sizes, from the issue: 3 invocations, 2 crashes, 2 expiries, 1 invalidation. */
const SIZES = ['N=3', 'MAX_CRASH=2', 'MAX_EXPIRE=2', 'MAX_INVALIDATE=1'];
/** Bitstate sizes: 5 invocations, the same budgets. */
const BIG = ['N=5', 'MAX_CRASH=2', 'MAX_EXPIRE=2', 'MAX_INVALIDATE=1'];

const SAFETY = ['NOCLAIM', 'SAFETY'];
/** Exhaustive searches store states compressed: about a quarter less memory, a third more time. */
const COLLAPSE = 'COLLAPSE';
/** Room for every process (invocations, jobs, the world, init) in the fairness bookkeeping. */
const LIVENESS = ['NFAIR=10'];
/**
 * The bitstate hash: 2^24 bits (2 MiB) by default, about 8 million states a mode. A bigger hash
 * searches further: MODEL_BITSTATE_BITS=26 stored 29.7 million states of result mode in 86 s.
 */
const BITSTATE_HASH = `-w${process.env.MODEL_BITSTATE_BITS ?? 24}`;
const DEPTH = '-m100000';

/**
 * `livenessParkers`: how many invocations may park in the liveness search (the others wait in the
 * slot); every one may in the safety searches. External mode's liveness search with all three
 * parking took 158 s and 1.5 GB, with one 48 s (docs/model.md).
 */
const MODES = [
  { label: 'result mode', defines: [] as string[], livenessParkers: 3 },
  { label: 'external mode', defines: ['EXTERNAL'], livenessParkers: 1 },
];

/** No crash, no paused holder, no artifact expiry, no invalidation: the seed's strategies fail without any fault. */
const NO_FAULTS = ['N=3', 'MAX_CRASH=0', 'MAX_EXPIRE=0', 'MAX_INVALIDATE=0'];
/** One paused holder whose lease lapses, and nothing else. */
const ONE_LAPSE = ['N=3', 'MAX_CRASH=0', 'MAX_EXPIRE=1', 'MAX_INVALIDATE=0'];

/** Each weaker strategy, the sizes it needs, and the properties its shortest counterexample may break. */
const WEAK: readonly { readonly define: string; readonly sizes: readonly string[]; readonly fails: readonly Violation[]; readonly resultModeOnly?: true }[] = [
  { define: 'NO_GUARD', sizes: NO_FAULTS, fails: ['no duplicate', 'no lost result'] }, // every invocation dispatches
  { define: 'ARTIFACT_ONLY', sizes: NO_FAULTS, fails: ['no duplicate'] }, // (a) in flight
  { define: 'LOCK_ONLY', sizes: NO_FAULTS, fails: ['no lost result'] }, // (c) after the lock's TTL
  { define: 'RELEASE_ON_ANY', sizes: NO_FAULTS, fails: ['no duplicate'] }, // (b) resolved, not written
  { define: 'PLAIN_DEL', sizes: ONE_LAPSE, fails: ['release safety'] }, // a stale holder's DEL
  { define: 'COARSE_CLOCK', sizes: NO_FAULTS, fails: ['fencing'] }, // tokens in whole seconds
  // A late commit that overwrites (commit.lua up to 0.2.0); external mode has no commit to weaken.
  { define: 'LATE_OVERWRITE', sizes: ONE_LAPSE, fails: ['one result'], resultModeOnly: true },
  // reap.lua up to 0.2.1: a waiter list outlived only the lock it parked on, not the next holder's.
  { define: 'OLD_REAP', sizes: ONE_LAPSE, fails: ['no stranded waiter'] },
  // 0.2.2's hand-over of a result the codec refused: the list taken, completions refused; no fault needed.
  { define: 'CODEC_COMPLETES', sizes: NO_FAULTS, fails: ['no stranded waiter'], resultModeOnly: true },
  // Not a strategy: the real protocol against a promise it does not make (docs/model.md).
  { define: 'STRICT', sizes: ONE_LAPSE, fails: ['strict no duplicate'] },
];

export const CONFIGS: readonly ModelConfig[] = [
  ...MODES.flatMap((m) => [
    { name: `fire-once, ${m.label}, safety, N=3`, defines: [...SIZES, ...m.defines], cflags: [...SAFETY, COLLAPSE], panArgs: [DEPTH] },
    {
      name: `fire-once, ${m.label}, liveness (weak fairness), N=3${m.livenessParkers < 3 ? `, ${m.livenessParkers} may park` : ''}`,
      defines: [...SIZES, `PARKERS=${m.livenessParkers}`, ...m.defines],
      cflags: [...LIVENESS, COLLAPSE],
      panArgs: ['-a', '-f', DEPTH],
    },
  ]),
  // Not a strategy: shows the liveness check can fail. Without fairness the clock may never
  // expire a crashed holder's lock, and its waiter polls forever.
  { name: 'fire-once, result mode, liveness WITHOUT fairness', defines: SIZES, cflags: LIVENESS, panArgs: ['-a', DEPTH], fails: ['acceptance cycle'] },
  ...MODES.map((m) => ({
    name: `fire-once, ${m.label}, safety, bitstate, N=5`,
    defines: [...BIG, ...m.defines],
    cflags: [...SAFETY, 'BITSTATE'],
    panArgs: [BITSTATE_HASH, DEPTH],
  })),
  // Breadth-first, so that each counterexample is a shortest one.
  ...WEAK.flatMap((w) =>
    (w.resultModeOnly ? MODES.slice(0, 1) : MODES).map((m) => ({
      name: `${w.define}, ${m.label}`,
      defines: [...w.sizes, w.define, ...m.defines],
      cflags: [...SAFETY, 'BFS'],
      panArgs: [],
      fails: w.fails,
    })),
  ),
];
