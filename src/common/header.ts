/**
 * The Temporal header that carries the dispatch scope from a workflow to the activities it
 * schedules. Pure constant: safe in the workflow sandbox and on the worker.
 *
 * @example
 * ```ts
 * import { SCOPE_HEADER } from 'temporal-fire-once/workflow';
 * SCOPE_HEADER; // 'temporal-fire-once-scope'
 * ```
 */
export const SCOPE_HEADER = 'temporal-fire-once-scope';
