/**
 * The Temporal header that carries the dispatch scope from a workflow to the activities it
 * schedules. Pure constant: safe in the workflow sandbox and on the worker.
 */
export const SCOPE_HEADER = 'temporal-fire-once-scope';
