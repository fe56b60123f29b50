import { u8, type Payload } from '@temporalio/common';
import table from '../conformance/scope-headers.json';

// The rows of test/conformance/scope-headers.json: values of the scope header and what a reader
// makes of each. Sandbox-safe (no Buffer, no node:*): a workflow interceptor module imports it.

/** One value of the scope header, and what every reader must make of it. */
export interface ScopeHeaderRow {
  readonly name: string;
  readonly encoding: string | null;
  readonly data?: string;
  readonly dataHex?: string;
  /** The scope read from it; `null`: none, the header is ignored. */
  readonly scope?: string | null;
  /** The FireOnceInvalidId message of a string that is no valid scope. */
  readonly invalid?: string;
}

export const SCOPE_HEADER_ROWS: readonly ScopeHeaderRow[] = table.rows;

/** The row named `name`. */
export function scopeHeaderRow(name: string): ScopeHeaderRow {
  const row = SCOPE_HEADER_ROWS.find((r) => r.name === name);
  if (row === undefined) throw new Error(`no scope header row ${JSON.stringify(name)}`);
  return row;
}

/** The header payload of `row`. */
export function scopeHeaderPayload(row: ScopeHeaderRow): Payload {
  const data = row.dataHex !== undefined ? Uint8Array.from(row.dataHex.match(/../g)!, (h) => parseInt(h, 16)) : u8(row.data!);
  return { metadata: row.encoding === null ? {} : { encoding: u8(row.encoding) }, data };
}
