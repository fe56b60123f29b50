/**
 * Run one model configuration: spin generates pan, gcc compiles it, pan searches, and for a
 * counterexample spin replays the trail. Everything happens in `dir`, never in the repository.
 */
import { execFile } from 'node:child_process';
import { copyFileSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { ModelConfig, Violation } from './configs';

const exec = promisify(execFile);

/** Run a tool in `cwd`; its stdout, whatever its exit code (pan's says little), unless it printed nothing. */
async function run(file: string, args: readonly string[], cwd: string): Promise<string> {
  try {
    return (await exec(file, [...args], { cwd, maxBuffer: BIG_OUTPUT })).stdout;
  } catch (err) {
    const { stdout, stderr } = err as { stdout?: string; stderr?: string };
    if (stdout) return stdout;
    throw new Error(`${file} ${args.join(' ')} failed in ${cwd}: ${stderr ?? String(err)}`);
  }
}
const MODEL = 'fire-once.pml';
const BIG_OUTPUT = 64 * 1024 * 1024;

/** What one configuration's search found. */
export interface Outcome {
  readonly config: ModelConfig;
  readonly errors: number;
  readonly states: number;
  readonly transitions: number;
  readonly depth: number;
  readonly memoryMb: number;
  /** Bitstate only: pan's hash factor (above 100, nearly every state was visited). */
  readonly hashFactor: number;
  /** pan's own search time, and the wall time of generate + compile + search. */
  readonly searchS: number;
  readonly wallS: number;
  /** The events of the counterexample, as the model prints them; empty when none. */
  readonly trail: readonly string[];
  readonly violation?: Violation;
  /** Set when the outcome is not what the configuration expects. */
  readonly problem?: string;
}

function number(output: string, pattern: RegExp): number {
  const m = pattern.exec(output);
  return m === null ? NaN : Number(m[1]);
}

/** The violated property, read from the trail's `@@ VIOLATION <property>:` line or pan's report. */
function violationOf(trail: readonly string[], panOutput: string): Violation | undefined {
  if (/acceptance cycle/.test(panOutput)) return 'acceptance cycle';
  const line = trail.find((l) => l.startsWith('VIOLATION '));
  return line === undefined ? undefined : (line.slice('VIOLATION '.length).split(':')[0] as Violation);
}

/** Replay pan's trail with spin and keep the model's own event lines (`@@ ...`). */
async function replay(dir: string, defines: readonly string[]): Promise<string[]> {
  const stdout = await run('spin', [...defines, '-t', MODEL], dir);
  const events: string[] = [];
  for (const line of stdout.split('\n')) {
    if (line.includes('START OF CYCLE')) events.push('-- from here on, forever: --');
    const at = line.indexOf('@@ ');
    if (at >= 0) events.push(line.slice(at + 3).trim());
  }
  return events;
}

export async function check(config: ModelConfig, root: string, modelFile: string): Promise<Outcome> {
  const started = Date.now();
  const dir = join(root, config.name.replace(/[^A-Za-z0-9=]+/g, '-'));
  mkdirSync(dir, { recursive: true });
  copyFileSync(modelFile, join(dir, MODEL));
  const defines = config.defines.map((d) => `-D${d}`);
  await run('spin', [...defines, '-a', MODEL], dir);
  const optimise = config.cflags.includes('BFS') ? '-O0' : '-O2'; // BFS runs are tiny: compile fast
  await run('gcc', [optimise, '-w', ...config.cflags.map((f) => `-D${f}`), '-o', 'pan', 'pan.c'], dir);
  const stdout = await run('./pan', config.panArgs, dir);
  const errors = number(stdout, /errors: (\d+)/);
  const trail = errors > 0 ? await replay(dir, defines) : [];
  const violation = errors > 0 ? violationOf(trail, stdout) : undefined;
  let problem: string | undefined;
  if (Number.isNaN(errors)) problem = `pan printed no result:\n${stdout}`;
  else if (config.fails === undefined && errors > 0) problem = `a property of the real protocol fails (${violation ?? 'unknown'})`;
  else if (config.fails !== undefined && errors === 0) problem = `expected a counterexample (${config.fails.join(' or ')}); spin found none`;
  else if (config.fails !== undefined && (violation === undefined || !config.fails.includes(violation)))
    problem = `expected "${config.fails.join('" or "')}" to fail, but "${violation ?? 'unknown'}" did`;
  return {
    config,
    errors,
    states: number(stdout, /([\d.e+]+) states, stored/),
    transitions: number(stdout, /([\d.e+]+) transitions/),
    depth: number(stdout, /depth reached (\d+)/),
    memoryMb: number(stdout, /([\d.]+)\s+total actual memory usage/),
    hashFactor: number(stdout, /hash factor: ([\d.e+]+)/),
    searchS: number(stdout, /pan: elapsed time ([\d.e+]+)/),
    wallS: (Date.now() - started) / 1000,
    trail,
    ...(violation !== undefined ? { violation } : {}),
    ...(problem !== undefined ? { problem } : {}),
  };
}
