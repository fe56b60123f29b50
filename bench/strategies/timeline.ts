/**
 * The SVG timeline of one run: a lane per strategy, a dot per invocation, a triangle per
 * dispatch the job runner logged, a line from each dispatch back to the invocation that caused
 * it, and the scenario's windows shaded behind.
 */
import type { Phase } from './strategies';
import type { StrategyRun } from './scenario';

const WIDTH = 1000;
const LEFT = 200;
const RIGHT = 30;
const TOP = 76;
const LANE = 74;
const BOTTOM = 56;

const PHASE_COLOUR: Readonly<Record<Phase, string>> = { open: '#222222', a: '#1f77b4', b: '#e08a00', c: '#2ca02c' };
const DISPATCH_COLOUR = '#d62728';

function esc(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
}

function niceStep(spanMs: number): number {
  for (const step of [250, 500, 1_000, 2_000, 5_000, 10_000]) if (spanMs / step <= 12) return step;
  return 20_000;
}

/**
 * Render one run as an SVG document. Time runs left to right, in ms from each strategy's first
 * invocation; every lane shares one scale.
 */
export function renderTimeline(run: readonly StrategyRun[], caption: string): string {
  const spanMs = Math.max(...run.map((r) => Math.max(r.marks.doneAt, r.marks.lockExpiredAt, ...r.dispatches.map((d) => d.at)))) * 1.04;
  const x = (ms: number) => LEFT + (Math.max(ms, 0) / spanMs) * (WIDTH - LEFT - RIGHT);
  const height = TOP + LANE * run.length + BOTTOM;
  const out: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${height}" viewBox="0 0 ${WIDTH} ${height}" font-family="sans-serif" font-size="12">`,
    `<rect width="${WIDTH}" height="${height}" fill="#ffffff"/>`,
    `<text x="12" y="20" font-size="14" font-weight="bold">${esc(caption)}</text>`,
    ...legend(),
  ];
  run.forEach((r, i) => out.push(...lane(r, TOP + i * LANE, x)));
  const axisY = TOP + LANE * run.length + 8;
  const step = niceStep(spanMs);
  out.push(`<line x1="${LEFT}" y1="${axisY}" x2="${WIDTH - RIGHT}" y2="${axisY}" stroke="#444"/>`);
  for (let t = 0; t <= spanMs; t += step) {
    out.push(`<line x1="${x(t)}" y1="${axisY}" x2="${x(t)}" y2="${axisY + 5}" stroke="#444"/>`);
    out.push(`<text x="${x(t)}" y="${axisY + 18}" text-anchor="middle">${t}</text>`);
  }
  out.push(`<text x="${(LEFT + WIDTH - RIGHT) / 2}" y="${axisY + 38}" text-anchor="middle">ms since the opening invocation</text>`);
  out.push('</svg>');
  return `${out.join('\n')}\n`;
}

function legend(): string[] {
  const items: string[] = [];
  let lx = 12;
  let y = 40;
  const add = (mark: (cx: number) => string, label: string) => {
    items.push(mark(lx + 6), `<text x="${lx + 16}" y="${y + 4}">${esc(label)}</text>`);
    lx += 30 + label.length * 6.2;
  };
  for (const [phase, label] of [
    ['open', 'opening invocation'],
    ['a', 'invocation (a)'],
    ['b', 'invocation (b)'],
    ['c', 'invocation (c)'],
  ] as const) {
    add((cx) => `<circle cx="${cx}" cy="${y}" r="4" fill="${PHASE_COLOUR[phase]}"/>`, label);
  }
  add((cx) => triangle(cx, y, DISPATCH_COLOUR), "dispatch, from the job runner's log");
  [lx, y] = [12, 58];
  add((cx) => `<rect x="${cx - 6}" y="${y - 5}" width="12" height="10" fill="#dbe9f6"/>`, 'first job in flight');
  add((cx) => `<rect x="${cx - 6}" y="${y - 5}" width="12" height="10" fill="#fde3bf"/>`, 'first job resolved, artifact not written');
  add(
    (cx) => `<line x1="${cx}" y1="${y - 6}" x2="${cx}" y2="${y + 6}" stroke="#777" stroke-dasharray="3,2"/>`,
    'a lock taken at the first dispatch has expired',
  );
  return items;
}

function trianglePoints(cx: number, cy: number): string {
  return `${cx - 5},${cy - 4} ${cx + 5},${cy - 4} ${cx},${cy + 5}`;
}

function triangle(cx: number, cy: number, fill: string): string {
  return `<polygon points="${trianglePoints(cx, cy)}" fill="${fill}"/>`;
}

function lane(r: StrategyRun, top: number, x: (ms: number) => number): string[] {
  const m = r.marks;
  const invY = top + 24;
  const disY = top + 50;
  const out: string[] = [
    `<line x1="12" y1="${top}" x2="${WIDTH - RIGHT}" y2="${top}" stroke="#e4e4e4"/>`,
    `<rect x="${x(m.inFlightAt)}" y="${top + 8}" width="${Math.max(x(m.resolvedAt) - x(m.inFlightAt), 0)}" height="${LANE - 16}" fill="#dbe9f6"/>`,
    `<rect x="${x(m.resolvedAt)}" y="${top + 8}" width="${Math.max(x(m.artifactAt) - x(m.resolvedAt), 0)}" height="${LANE - 16}" fill="#fde3bf"/>`,
    `<line x1="${x(m.lockExpiredAt)}" y1="${top + 6}" x2="${x(m.lockExpiredAt)}" y2="${top + LANE - 6}" stroke="#777" stroke-dasharray="3,2"/>`,
    `<text x="12" y="${top + 30}" font-weight="bold">${esc(r.strategy)}</text>`,
    `<text x="12" y="${top + 48}" fill="${r.dispatches.length === 1 ? '#2a7a2a' : DISPATCH_COLOUR}">${r.dispatches.length} dispatch${r.dispatches.length === 1 ? '' : 'es'}, ${r.invocations.length} invocations</text>`,
  ];
  const invAt = new Map(r.invocations.map((inv) => [inv.id, inv.at]));
  for (const d of r.dispatches) {
    out.push(
      `<line x1="${x(invAt.get(d.invocation) ?? d.at)}" y1="${invY}" x2="${x(d.at)}" y2="${disY}" stroke="${PHASE_COLOUR[d.phase]}" stroke-opacity="0.45"/>`,
    );
  }
  for (const inv of r.invocations) {
    out.push(
      `<circle cx="${x(inv.at)}" cy="${invY}" r="3.5" fill="${PHASE_COLOUR[inv.phase]}" fill-opacity="0.85"><title>${esc(`${inv.id} at ${inv.at} ms`)}</title></circle>`,
    );
  }
  for (const d of r.dispatches) {
    out.push(triangle(x(d.at), disY, DISPATCH_COLOUR).replace('/>', `><title>${esc(`dispatch by ${d.invocation} at ${d.at} ms`)}</title></polygon>`));
  }
  return out;
}
