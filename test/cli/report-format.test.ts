import { formatReport, SCOPE_COLUMN_WIDTH } from '../../src/cli/report-format';
import type { Report } from '../../src/cli/report';

describe("report's human form", () => {
  const long = `head-${'x'.repeat(290)}-tail`;
  const report = (scopes: readonly string[]): Report => ({
    prefix: 'fire-once',
    namespace: 'default',
    stream: 'fire-once:v3:default:log',
    from: '2026-12-07T00:00:00.000Z',
    to: '2026-12-07T01:00:00.000Z',
    events: scopes.length,
    decisions: ['dispatched'],
    byJobType: [{ jobType: 'summary', counts: { dispatched: scopes.length }, total: scopes.length }],
    byScope: scopes.map((scope) => ({ jobType: 'summary', scope, counts: { dispatched: 1 }, total: 1 })),
    duplicates: [],
  });

  it(`cuts a scope over ${SCOPE_COLUMN_WIDTH} characters in the middle in the by-scope table, says so, and keeps short ones whole`, () => {
    const text = formatReport(report([long, 'chat-7']));
    const rows = text.split('\n').filter((line) => line.startsWith('│'));
    expect(Math.max(...rows.map((row) => [...row].length))).toBeLessThan(SCOPE_COLUMN_WIDTH + 60);
    expect(text).toContain(`head-${'x'.repeat(25)}…${'x'.repeat(24)}-tail`);
    expect(text).toContain(`by scope (2, scopes over ${SCOPE_COLUMN_WIDTH} characters cut in the middle (…); --json gives them whole)`);
    expect(text).toMatch(/│ chat-7 +│/);
  });

  it('says nothing of cutting when every scope fits', () => {
    expect(formatReport(report(['chat-7', 'x'.repeat(SCOPE_COLUMN_WIDTH)]))).not.toContain('cut in the middle');
  });
});
