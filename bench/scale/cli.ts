/** The flags of `npm run bench:scale`, parsed with commander and checked in one place. */
import { Command, InvalidArgumentError } from 'commander';
import { positiveInt } from '../shared/args';
import { STORES, type StoreName } from './stores';

export interface ScaleConfig {
  /** K values for the core guard alone (no Temporal), in order. */
  readonly coreScopes: readonly number[];
  /** K values through Temporal, in order. */
  readonly e2eScopes: readonly number[];
  /** Invocations racing on each scope. */
  readonly racers: number;
  /** Stores the core guard races on. */
  readonly stores: readonly StoreName[];
  /** Stores raced through Temporal (where the dev server, not the store, sets the pace). */
  readonly e2eStores: readonly StoreName[];
  /** How long a dispatched job runs before it resolves. */
  readonly jobMs: number;
  /** Scopes raced at the same time, core and through Temporal. */
  readonly coreConcurrency: number;
  readonly e2eConcurrency: number;
  /** Worker processes through Temporal. */
  readonly workers: number;
  /** A file for the dev server's state; without it the state is in memory. */
  readonly temporalDb?: string;
  readonly outDir: string;
}

function intList(value: string): number[] {
  if (value.trim() === '' || value === 'none') return [];
  return value.split(',').map((v) => positiveInt(v.trim()));
}

function storeList(value: string): StoreName[] {
  const names = value.split(',').map((v) => v.trim());
  for (const name of names) {
    if (!(STORES as readonly string[]).includes(name)) throw new InvalidArgumentError(`unknown store ${JSON.stringify(name)} (one of ${STORES.join(', ')})`);
  }
  return names as StoreName[];
}

export function parseScaleArgs(argv: readonly string[]): ScaleConfig {
  const program = new Command('bench:scale')
    .description('K scopes x N racing invocations against one Redis and a Redis Cluster; 0 duplicates required.')
    .option('--core-scopes <list>', 'K values for the core guard alone, comma-separated, or none', intList, [1000, 10000])
    .option('--e2e-scopes <list>', 'K values through Temporal, comma-separated, or none', intList, [1000])
    .option('--racers <n>', 'invocations racing on each scope', positiveInt, 20)
    .option('--stores <list>', `stores for the core guard: comma-separated subset of ${STORES.join(',')}`, storeList, [...STORES])
    .option('--e2e-stores <list>', `stores through Temporal: comma-separated subset of ${STORES.join(',')}`, storeList, ['cluster'])
    .option('--job-ms <ms>', 'how long a dispatched job runs', positiveInt, 100)
    .option('--core-concurrency <n>', 'scopes raced at once by the core bench', positiveInt, 100)
    .option('--e2e-concurrency <n>', 'scopes whose workflow runs are in flight at once', positiveInt, 25)
    .option('--workers <n>', 'worker processes through Temporal', positiveInt, 2)
    .option('--temporal-db <file>', "keep the dev server's state in this SQLite file, not in memory (for long e2e runs)")
    .option('--out-dir <dir>', 'where scale.json goes', 'bench/out')
    .parse([...argv]);
  return program.opts<ScaleConfig>();
}
