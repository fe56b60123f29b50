import { FireOnceConfigError } from '../core/errors';
import { currentActivityContext } from './context';
import { toApplicationFailure } from './failures';
import { checkActivityOptions, type ExternalArtifact, type FireOnceOptions, type ValueFireOnceOptions } from './activity-options';

const OPTIONS = Symbol.for('temporal-fire-once.options');

/** Activity contexts whose call went through the fire-once interceptor. */
const guardedContexts = new WeakSet<object>();
/**
 * Activity contexts a fire-once interceptor saw and found no options for: `'unlisted'` when the
 * activity was not among the worker's activities it mapped, `'unmarked'` when it was, unmarked.
 */
const unguardedContexts = new WeakMap<object, 'unlisted' | 'unmarked'>();

type AnyFunction = (...args: any[]) => Promise<unknown>; // eslint-disable-line @typescript-eslint/no-explicit-any -- any activity signature; unknown[] would reject typed parameters

/**
 * The fire-once options recorded on a wrapped activity, or `undefined` for a plain one.
 *
 * @example
 * ```ts
 * import { fireOnce } from 'temporal-fire-once';
 * import { fireOnceOptionsOf } from 'temporal-fire-once/core';
 * const send = fireOnce(async (): Promise<void> => undefined, { jobType: 'mail' });
 * fireOnceOptionsOf(send)?.jobType; // 'mail'
 * ```
 */
export function fireOnceOptionsOf(fn: unknown): FireOnceOptions | undefined {
  return typeof fn === 'function' ? (fn as unknown as Record<symbol, FireOnceOptions | undefined>)[OPTIONS] : undefined;
}

/** Called by the interceptor for an activity it has no fire-once options for, of the worker's `map`. */
export function markUnguarded(ctx: object & { info: { activityType: string } }, map: ReadonlyMap<string, FireOnceOptions>): void {
  unguardedContexts.set(ctx, registeredNames.get(map)?.has(ctx.info.activityType) ? 'unmarked' : 'unlisted');
}

/** Called by the interceptor before it runs a guarded activity. */
export function markGuarded(ctx: object): void {
  guardedContexts.add(ctx);
}

/** Whether a fire-once interceptor already guards this activity context's call. */
export function isGuarded(ctx: object): boolean {
  return guardedContexts.has(ctx);
}

/**
 * Mark an activity function as fire-once. The `FireOncePlugin` guards it by its registered name;
 * calling it outside any activity (a plain unit test) just runs `fn`. Called inside an activity on
 * a worker without the plugin, it fails with a non-retryable `ApplicationFailure` of type
 * `FireOnceConfigError` rather than dispatch unguarded.
 *
 * `onInFlight: 'skip'` and external artifacts resolve `undefined` when they do not run, so they
 * type-check only on activities that return `Promise<void>`.
 *
 * @example
 * ```ts
 * import { fireOnce } from 'temporal-fire-once';
 *
 * async function summarise(sessionId: string): Promise<string> {
 *   return `summary of ${sessionId}`;
 * }
 *
 * export const activities = {
 *   summarise: fireOnce(summarise, { jobType: 'summary', scope: ([sessionId]) => sessionId }),
 * };
 * ```
 */
export function fireOnce<F extends (...args: any[]) => Promise<void>>(fn: F, options?: FireOnceOptions<Parameters<F>>): F; // eslint-disable-line @typescript-eslint/no-explicit-any -- any activity signature
export function fireOnce<F extends AnyFunction>(fn: F, options?: ValueFireOnceOptions<Parameters<F>>): F;
export function fireOnce<F extends AnyFunction>(fn: F, options: FireOnceOptions<Parameters<F>> = {}): F {
  return markFireOnce(fn, options as FireOnceOptions);
}

function markFireOnce<F extends AnyFunction>(fn: F, options: FireOnceOptions): F {
  if (typeof fn !== 'function') {
    throw new FireOnceConfigError(`fireOnce: expected an activity function (got ${typeof fn})`);
  }
  const where = `fireOnce(${fn.name || 'anonymous'})`;
  if (fireOnceOptionsOf(fn) !== undefined) {
    // The outer call's options would replace the inner's without a word.
    throw new FireOnceConfigError(`${where}: the function is already marked fire-once; give every option in one fireOnce() call`);
  }
  checkActivityOptions(options as FireOnceOptions<never>, where);
  const frozen = Object.freeze({ ...options });
  const wrapped = function (this: unknown, ...args: Parameters<F>) {
    const ctx = currentActivityContext();
    if (ctx !== undefined && !guardedContexts.has(ctx)) {
      const seen = unguardedContexts.get(ctx);
      const activity = `activity ${JSON.stringify(ctx.info.activityType)} is marked fire-once, but`;
      const refused = new FireOnceConfigError(
        seen === 'unmarked'
          ? `the fire-once function ${JSON.stringify(fn.name || 'anonymous')} was called inside activity ${JSON.stringify(ctx.info.activityType)}, which is not marked fire-once: ` +
              'a guard runs around the activity a workflow schedules, so call it from the workflow, or mark that activity itself. Refusing to dispatch unguarded'
          : seen === 'unlisted'
            ? `${activity} the fire-once interceptor of this worker was not given it: build the interceptor's map with fireOnceActivityMap ` +
              "from every activity the worker registers, a plugin's included (FireOncePlugin reads them as the worker runs). Refusing to dispatch unguarded"
            : `${activity} this worker has no FireOncePlugin (or fire-once activity interceptor): refusing to dispatch unguarded`,
        { activityType: ctx.info.activityType },
      );
      // No interceptor maps this one: Temporal would retry a plain error on every attempt.
      throw toApplicationFailure(refused);
    }
    return fn.apply(this, args);
  };
  Object.defineProperty(wrapped, 'name', { value: fn.name });
  Object.defineProperty(wrapped, OPTIONS, { value: frozen });
  return wrapped as unknown as F;
}

/**
 * TC39 standard method decorator (no `experimentalDecorators`) for activity classes: records the
 * options and binds the method onto each instance, so `Object.entries(instance)` registers it.
 * It delegates to {@link fireOnce}.
 *
 * @example
 * ```ts
 * import { FireOnce } from 'temporal-fire-once';
 *
 * export class ReportActivities {
 *   constructor(private readonly prefix: string) {}
 *
 *   @FireOnce({ jobType: 'report' })
 *   async buildReport(id: string): Promise<string> {
 *     return `${this.prefix}${id}`;
 *   }
 * }
 * // Worker.create({ activities: new ReportActivities('r-'), plugins: [plugin], ... })
 * ```
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- options for any method signature
export function FireOnce<const O extends FireOnceOptions<any[]>>(options: O = {} as O) {
  checkActivityOptions(options as FireOnceOptions<never>, '@FireOnce');
  return function <This, A extends any[], R>( // eslint-disable-line @typescript-eslint/no-explicit-any -- any method parameters
    method: (this: This, ...args: A) => Promise<ResultOf<O, R>>,
    context: ClassMethodDecoratorContext<This, (this: This, ...args: A) => Promise<ResultOf<O, R>>>,
  ): void {
    if (context.private || context.static || typeof context.name !== 'string') {
      throw new FireOnceConfigError(`@FireOnce on ${String(context.name)}: only public instance methods with string names can be activities`);
    }
    const name = context.name;
    context.addInitializer(function (this: This) {
      const bound = markFireOnce(method.bind(this), options as FireOnceOptions);
      Object.defineProperty(bound, 'name', { value: name });
      Object.defineProperty(this as object, name, { value: bound, enumerable: true, writable: true, configurable: true });
    });
  };
}

/** What a decorated method must resolve to: `void` when a call may resolve without running it. */
type ResultOf<O, R> = O extends { onInFlight: 'skip' } ? void : O extends { artifact: ExternalArtifact } ? void : R;

/**
 * The guarded activities of an activities object (plain functions or a class instance), by the
 * name the worker registers them under. Unmarked activities are left out.
 *
 * @example
 * ```ts
 * import { fireOnce } from 'temporal-fire-once';
 * import { fireOnceActivityMap } from 'temporal-fire-once/core';
 * const map = fireOnceActivityMap({ send: fireOnce(async () => undefined), plain: async () => 1 });
 * map.has('send');  // true
 * map.has('plain'); // false
 * ```
 */
export function fireOnceActivityMap(activities: object | undefined): Map<string, FireOnceOptions> {
  const map = new Map<string, FireOnceOptions>();
  const names = new Set<string>();
  for (const [name, fn] of Object.entries(activities ?? {})) {
    if (typeof fn === 'function') names.add(name); // what the worker registers
    const options = fireOnceOptionsOf(fn);
    if (options !== undefined) map.set(name, options);
  }
  registeredNames.set(map, names);
  return map;
}

/** Every activity name the worker registers, for each map {@link fireOnceActivityMap} made. */
const registeredNames = new WeakMap<ReadonlyMap<string, FireOnceOptions>, ReadonlySet<string>>();

/**
 * The options of the activity a worker runs for `activityType`: the one registered under that
 * name, else, for a type the worker has no function of, its `default` activity's, which the SDK
 * runs then. Only a map from {@link fireOnceActivityMap} knows which names the worker has; in one
 * built by hand, `default` lends its options to no other type.
 */
export function fireOnceOptionsFor(map: ReadonlyMap<string, FireOnceOptions>, activityType: string): FireOnceOptions | undefined {
  const own = map.get(activityType);
  if (own !== undefined) return own;
  const names = registeredNames.get(map);
  return names === undefined || names.has(activityType) ? undefined : map.get('default');
}
