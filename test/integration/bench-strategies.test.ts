import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runScript } from '../support/scripts';

// `npm run bench:strategies` runs the library's own strategy through the real plugin: one run of
// the fire-once strategy alone, on the suite's Redis and Temporal, must dispatch once (counted
// from the bench's job runner's log, not from the guard) and exit 0. Defect 108: the guard refused
// the bench's external artifact key, every invocation failed, and the bench gave up.
jest.setTimeout(180_000);

describe('npm run bench:strategies', () => {
  const outDir = mkdtempSync(join(tmpdir(), 'bench-strategies-'));
  afterAll(() => rmSync(outDir, { recursive: true, force: true }));

  it('runs the fire-once strategy to its end: one dispatch in all, exit 0, and leaves the committed timeline alone', async () => {
    const env = { REDIS_URL: process.env.REDIS_URL!, TEMPORAL_ADDRESS: process.env.TEMPORAL_ADDRESS! };
    const committed = join(__dirname, '..', '..', 'bench', 'strategies-timeline.svg');
    const before = readFileSync(committed, 'utf8');
    const args = ['--runs', '1', '--strategies', 'fire-once', '--out-dir', outDir];
    const bench = await runScript(join('bench', 'strategies', 'main.ts'), args, env, 170_000);
    expect(readFileSync(committed, 'utf8') === before).toBe(true); // a user who reproduces the table changes no tracked file
    expect({ code: bench.code, failed: /FireOnceConfigError|gave up/.exec(bench.stderr + bench.stdout)?.[0] }).toEqual({ code: 0, failed: undefined });
    const [[run]] = (JSON.parse(readFileSync(join(outDir, 'strategies.json'), 'utf8')) as { runs: { strategy: string; dispatches: unknown[] }[][] }).runs;
    expect({ strategy: run.strategy, dispatches: run.dispatches.length }).toEqual({ strategy: 'fire-once', dispatches: 1 });
  });
});
