import fc from 'fast-check';
import { formatMs } from '../../src/cli/table';

/** What `formatMs` printed, back in milliseconds, and the largest rounding error its form allows. */
function readBack(text: string): { ms: number; within: number } {
  const forms: [RegExp, (m: RegExpExecArray) => { ms: number; within: number }][] = [
    [/^(\d+) ms$/, (m) => ({ ms: Number(m[1]), within: 0 })],
    [/^(\d+\.\d) s$/, (m) => ({ ms: Number(m[1]) * 1_000, within: 50 })],
    [/^(\d+)m (\d+)s$/, (m) => ({ ms: (Number(m[1]) * 60 + Number(m[2])) * 1_000, within: 500 })],
    [/^(\d+)h (\d+)m$/, (m) => ({ ms: (Number(m[1]) * 60 + Number(m[2])) * 60_000, within: 30_000 })],
    [/^(\d+)d (\d+)h$/, (m) => ({ ms: (Number(m[1]) * 24 + Number(m[2])) * 3_600_000, within: 1_800_000 })],
  ];
  for (const [form, read] of forms) {
    const m = form.exec(text);
    if (m) return read(m);
  }
  throw new Error(`formatMs gave ${JSON.stringify(text)}, which no form reads`);
}

describe('formatMs (TTLs and ages in the CLI)', () => {
  it('reads back within its rounding, with no unit at or past its carry (no "60.0 s", "9m 60s", "1h 60m" or "2d 24h")', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 40 * 24 * 3_600_000 }), (ms) => {
        const text = formatMs(ms);
        const back = readBack(text);
        expect(Math.abs(back.ms - ms)).toBeLessThanOrEqual(back.within);
        const [, first, second] = /^(\d+(?:\.\d)?)\S* ?(\d+)?/.exec(text) ?? [];
        if (text.endsWith(' s')) expect(Number(first)).toBeLessThan(60);
        if (/m \d+s$/.test(text)) expect([Number(first), Number(second)].every((n) => n < 60)).toBe(true);
        if (/h \d+m$/.test(text)) expect([Number(first) < 48, Number(second) < 60]).toEqual([true, true]);
        if (/d \d+h$/.test(text)) expect(Number(second)).toBeLessThan(24);
      }),
      { numRuns: 5_000 },
    );
  });

  it.each([
    [999, '999 ms'],
    [59_949, '59.9 s'],
    [59_999, '1m 0s'],
    [599_999, '10m 0s'],
    [3_599_700, '1h 0m'],
    [1_234_567, '20m 35s'],
    [172_799_999, '2d 0h'],
  ])('%d ms reads %s', (ms, text) => {
    expect(formatMs(ms)).toBe(text);
  });
});
