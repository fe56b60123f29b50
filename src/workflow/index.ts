/**
 * The workflow-sandbox side of temporal-fire-once. Imports nothing from Node or Redis, so it is
 * safe in any workflow bundle.
 *
 * @packageDocumentation
 */
export { setDispatchScope, getDispatchScope } from './scope';
export { SCOPE_HEADER } from '../common/header';
