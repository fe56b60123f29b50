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

/** `1234567` → `20m 34.6s`; for TTLs and ages. */
export function formatMs(ms: number): string {
  if (ms < 1_000) return `${ms} ms`;
  const s = ms / 1_000;
  if (s < 60) return `${s.toFixed(1)} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m ${Math.round(s - m * 60)}s`;
  const h = Math.floor(m / 60);
  if (h < 48) return `${h}h ${m - h * 60}m`;
  return `${Math.floor(h / 24)}d ${h % 24}h`;
}
