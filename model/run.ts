/**
 * `npm run model`: model-check the fire-once protocol with spin (model/fire-once.pml,
 * docs/model.md). Checks every configuration of model/configs.ts, two at a time, in a fresh
 * directory under the OS temp dir; prints a table of state counts, times and memory, and each
 * weaker strategy's counterexample as a sequence of events. Exits non-zero when a property of
 * the real protocol fails, or a weaker strategy (or the unfair liveness check) stops failing.
 *
 * Needs `spin` and `gcc` on PATH (Debian: `apt-get install -y spin gcc`).
 * MODEL_JOBS sets how many searches run at once (default 2); MODEL_ONLY=<text> runs only the
 * configurations whose name contains it.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CONFIGS, type ModelConfig } from './configs';
import { check, type Outcome } from './pan';

const MODEL_FILE = join(__dirname, 'fire-once.pml');

function requireTool(name: string, versionArg: string): void {
  try {
    execFileSync(name, [versionArg], { stdio: 'ignore' });
  } catch {
    throw new Error(`${name} not found: install it (Debian: apt-get install -y spin gcc)`);
  }
}

/** Run `work` over `items`, at most `jobs` at once, keeping the input order in the result. */
async function pool<T, R>(items: readonly T[], jobs: number, work: (item: T) => Promise<R>): Promise<R[]> {
  const results: R[] = new Array<R>(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      results[i] = await work(items[i]);
    }
  };
  await Promise.all(Array.from({ length: Math.min(jobs, items.length) }, worker));
  return results;
}

const fmt = (n: number) => (Number.isNaN(n) ? '?' : n.toLocaleString('en-US'));

function row(o: Outcome): string {
  const coverage = Number.isNaN(o.hashFactor) ? '' : ` (hash factor ${o.hashFactor})`;
  const verdict = o.problem !== undefined ? 'FAIL' : o.config.fails !== undefined ? `counterexample: ${o.violation}` : `holds${coverage}`;
  return `| ${o.config.name} | ${fmt(o.states)} | ${fmt(o.transitions)} | ${fmt(o.depth)} | ${o.memoryMb} | ${o.searchS} | ${o.wallS.toFixed(1)} | ${verdict} |`;
}

function printTrail(o: Outcome): void {
  console.log(`\n${o.config.name}: fails "${o.violation}"`);
  o.trail.forEach((event, i) => console.log(`  ${String(i + 1).padStart(2)}. ${event}`));
}

async function main(): Promise<number> {
  requireTool('spin', '-V');
  requireTool('gcc', '--version');
  const jobs = Number(process.env.MODEL_JOBS ?? 2);
  const root = mkdtempSync(join(tmpdir(), 'fire-once-model-'));
  const started = Date.now();
  try {
    const configs = CONFIGS.filter((c) => c.name.includes(process.env.MODEL_ONLY ?? ''));
    console.log(`spin: ${execFileSync('spin', ['-V'], { encoding: 'utf8' }).trim()}; ${configs.length} configurations, ${jobs} at a time`);
    const outcomes = await pool(configs, jobs, async (config: ModelConfig) => {
      const o = await check(config, root, MODEL_FILE);
      console.log(`  done: ${config.name} (${o.wallS.toFixed(1)} s)${o.problem !== undefined ? ' FAIL' : ''}`);
      return o;
    });
    console.log('\n| configuration | states stored | transitions | depth | memory MB | search s | wall s | result |');
    console.log('| --- | --- | --- | --- | --- | --- | --- | --- |');
    outcomes.forEach((o) => console.log(row(o)));
    outcomes.filter((o) => o.trail.length > 0).forEach(printTrail);
    const problems = outcomes.filter((o) => o.problem !== undefined);
    problems.forEach((o) => console.error(`\nFAIL ${o.config.name}: ${o.problem}`));
    console.log(`\n${outcomes.length - problems.length}/${outcomes.length} configurations as expected in ${((Date.now() - started) / 1000).toFixed(1)} s`);
    return problems.length === 0 ? 0 : 1;
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    console.error(err);
    process.exit(2);
  },
);
