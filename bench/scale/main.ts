/**
 * `npm run bench:scale`: K scopes x 20 racing invocations, on one redis-server and on a 3-master
 * Redis Cluster, with the core guard alone and through a Temporal dev server, for growing K.
 * Prints the throughput, writes bench/out/scale.json, and exits non-zero on any duplicate or
 * missing dispatch or failed invocation. `--help` lists the flags.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, platform, release, tmpdir, totalmem } from 'node:os';
import { join } from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { startTemporal, type TemporalService } from '../../sample-workflows/services';
import { bundleSampleWorkflows, quietTemporalLogs } from '../../sample-workflows/shared/temporal';
import { parseScaleArgs, type ScaleConfig } from './cli';
import { coreRace, type RaceResult } from './core-race';
import { e2eRace } from './e2e-race';
import { problems, renderTable } from './report';
import { startStore, type Store } from './stores';

const describe = (r: RaceResult) =>
  `  ${r.mode.padEnd(4)} ${r.store.padEnd(8)} K=${String(r.scopes).padEnd(6)} ${r.invocations} invocations in ${(r.wallMs / 1000).toFixed(1)} s: ` +
  `${r.dispatches} dispatches, ${r.duplicates} duplicates, ${r.missing} missing, ${r.failed} failed`;

async function run(config: ScaleConfig): Promise<number> {
  quietTemporalLogs('ERROR');
  const results: RaceResult[] = [];
  const stores: Store[] = [];
  let temporal: TemporalService | undefined;
  let connection: Connection | undefined;
  const bundleDir = mkdtempSync(join(tmpdir(), 'bench-scale-'));
  const started = Date.now();
  try {
    const needed = [...(config.coreScopes.length > 0 ? config.stores : []), ...(config.e2eScopes.length > 0 ? config.e2eStores : [])];
    for (const name of new Set(needed)) stores.push(await startStore(name));
    console.log(`stores: ${stores.map((s) => `${s.name} (${s.source})`).join(', ')}`);
    const storesFor = (names: readonly string[]) => stores.filter((s) => names.includes(s.name));
    for (const k of config.coreScopes) {
      for (const store of storesFor(config.stores)) {
        const r = await coreRace(store, { scopes: k, racers: config.racers, jobMs: config.jobMs, concurrency: config.coreConcurrency });
        console.log(describe(r));
        results.push(r);
      }
    }
    if (config.e2eScopes.length > 0) {
      // The file is scratch state for one run: write-ahead logging without fsync keeps it fast.
      temporal = await startTemporal(config.temporalDb ? { dbFilename: config.temporalDb, sqlitePragmas: ['journal_mode=wal', 'synchronous=off'] } : {});
      connection = await Connection.connect({ address: temporal.address });
      const bundlePath = join(bundleDir, 'workflows.js');
      writeFileSync(bundlePath, (await bundleSampleWorkflows(require.resolve('./workflows'))).code);
      const services = { client: new Client({ connection }), temporalAddress: temporal.address, bundlePath };
      console.log(`temporal: ${temporal.address} (${temporal.source})`);
      for (const k of config.e2eScopes) {
        for (const store of storesFor(config.e2eStores)) {
          const r = await e2eRace(store, services, {
            scopes: k,
            racers: config.racers,
            jobMs: config.jobMs,
            concurrency: config.e2eConcurrency,
            workers: config.workers,
          });
          console.log(describe(r));
          results.push(r);
        }
      }
    }
  } finally {
    await connection?.close();
    await temporal?.stop();
    for (const store of stores) await store.stop();
    rmSync(bundleDir, { recursive: true, force: true });
  }
  console.log(`\n${renderTable(results)}`);
  mkdirSync(config.outDir, { recursive: true });
  const report = {
    benchmark: 'scale',
    finishedAt: new Date().toISOString(),
    command: ['npm run bench:scale', ...(process.argv.length > 2 ? ['--', ...process.argv.slice(2)] : [])].join(' '),
    machine: {
      cpus: cpus().length,
      cpuModel: cpus()[0]?.model ?? 'unknown',
      totalMemGiB: Math.round(totalmem() / 2 ** 30),
      node: process.version,
      platform: `${platform()} ${release()}`,
    },
    config,
    totalMs: Date.now() - started,
    results,
  };
  writeFileSync(join(config.outDir, 'scale.json'), `${JSON.stringify(report, null, 2)}\n`);
  const found = problems(results);
  for (const p of found) console.error(`FAIL: ${p}`);
  if (found.length === 0) console.log(`0 duplicates in ${results.length} run(s); ${Math.round((Date.now() - started) / 1000)} s in all`);
  return found.length === 0 ? 0 : 1;
}

run(parseScaleArgs(process.argv))
  .then((code) => process.exit(code))
  .catch((err) => {
    console.error(err instanceof Error ? (err.stack ?? err.message) : err);
    process.exit(1);
  });
