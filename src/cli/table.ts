import Table from 'cli-table3';
import { printable } from './printable';

/**
 * A plain table: no colours, so it reads the same in a terminal, a CI log or a file. Every cell
 * goes through {@link printable}: a cell holds IDs read from Redis, and a newline or an ANSI escape
 * in one must not draw lines of its own.
 */
export function table(head: readonly string[], rows: readonly (readonly (string | number)[])[]): string {
  const t = new Table({ ...(head.length > 0 ? { head: head.map(printable) } : {}), style: { head: [], border: [] } });
  for (const row of rows) t.push(row.map((cell) => printable(String(cell))));
  return t.toString();
}

/**
 * `1234567` → `20m 35s`; for TTLs and ages. Each unit is rounded before it is split, so a value
 * just under a boundary reads as the next unit (`59999` → `1m 0s`), never as `60.0 s` or `9m 60s`.
 */
export function formatMs(ms: number): string {
  if (ms < 1_000) return `${ms} ms`;
  const tenths = Math.round(ms / 100);
  if (tenths < 600) return `${(tenths / 10).toFixed(1)} s`;
  const seconds = Math.round(ms / 1_000);
  const m = Math.floor(seconds / 60);
  if (m < 60) return `${m}m ${seconds % 60}s`;
  const minutes = Math.round(ms / 60_000);
  const h = Math.floor(minutes / 60);
  if (h < 48) return `${h}h ${minutes % 60}m`;
  const hours = Math.round(ms / 3_600_000);
  return `${Math.floor(hours / 24)}d ${hours % 24}h`;
}
