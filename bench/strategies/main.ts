/**
 * `npm run bench:strategies`: the seed's strategy table, reproduced live. Five strategies and
 * Temporal's own idiom (`temporal-native`), the chat-session scenario with invocations in three
 * phases, on a real Temporal dev server and a real Redis (found or started as the tests do).
 * Dispatches are counted from the job runner's log. Exits non-zero if fire-once or
 * temporal-native ever dispatches other than once, or a strawman fails to show the failure the
 * seed predicts for it. `--help` lists the flags.
 */
import { copyFileSync, mkdirSync, writeFileSync } from 'node:fs';
import { cpus, platform, release, totalmem } from 'node:os';
import { dirname, join } from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { NativeConnection } from '@temporalio/worker';
import { Redis } from 'ioredis';
import { withRedisAndTemporal, type RedisService, type TemporalService } from '../../sample-workflows/services';
import { runMain } from '../../sample-workflows/shared/env';
import { bundleSampleWorkflows, quietTemporalLogs } from '../../sample-workflows/shared/temporal';
import { parseBenchArgs, type BenchConfig } from './cli';
import { checkPredictions, renderTable, summarise } from './report';
import { runOnce, type BenchServices } from './run';
import type { StrategyRun } from './scenario';
import { mustFireOnce } from './strategies';
import { renderTimeline } from './timeline';

function progressLine(runs: number, r: StrategyRun): string {
  const d = r.duplicates;
  return `  [run ${r.run}/${runs}] ${r.strategy.padEnd(26)} ${String(r.dispatches.length).padStart(3)} dispatch(es)  dup a ${d.a}, b ${d.b}, c ${d.c}  ${r.wallMs} ms`;
}

function machine() {
  return {
    cpus: cpus().length,
    cpuModel: cpus()[0]?.model ?? 'unknown',
    totalMemGiB: Math.round((totalmem() / 2 ** 30) * 10) / 10,
    node: process.version,
    platform: `${platform()} ${release()}`,
  };
}

async function bench(config: BenchConfig, redisService: RedisService, temporal: TemporalService): Promise<number> {
  const redis = new Redis(redisService.url);
  const native = await NativeConnection.connect({ address: temporal.address });
  const connection = await Connection.connect({ address: temporal.address });
  try {
    console.log('bundling the bench workflow...');
    const workflowBundle = await bundleSampleWorkflows(require.resolve('./workflows'));
    const services: BenchServices = { redis, redisUrl: redisService.url, native, client: new Client({ connection }), workflowBundle };
    console.log(
      `chat-session: 1 opening invocation, then ${config.burstA} in flight (a), ${config.burstB} resolved-not-written (b), ` +
        `${config.burstC} after the lock TTL (c), ${config.spacingMs} ms apart; job ${config.jobMs} ms, artifact ` +
        `${config.artifactDelayMs} ms after it resolves, lock TTL ${config.lockTtlMs} ms; ${config.runs} run(s)\n`,
    );
    const started = Date.now();
    const runs: StrategyRun[][] = [];
    for (let run = 1; run <= config.runs; run++) {
      runs.push(await runOnce(services, config, run, (r) => console.log(progressLine(config.runs, r))));
    }
    const totalMs = Date.now() - started;
    const summary = summarise(runs);
    const verdict = checkPredictions(runs);
    console.log(`\n${config.runs} run(s) in ${Math.round(totalMs / 1000)} s; cells are median (min–max) over the runs\n`);
    console.log(renderTable(summary));

    mkdirSync(config.outDir, { recursive: true });
    const jsonPath = join(config.outDir, 'strategies.json');
    const report = {
      benchmark: 'strategies',
      finishedAt: new Date().toISOString(),
      command: ['npm run bench:strategies', ...(process.argv.length > 2 ? ['--', ...process.argv.slice(2)] : [])].join(' '),
      machine: machine(),
      services: { redis: redisService.description, temporal: temporal.source },
      config,
      totalMs,
      summary,
      verdict,
      runs,
    };
    writeFileSync(jsonPath, `${JSON.stringify(report, null, 2)}\n`);
    const svg = renderTimeline(
      runs[0],
      `chat-session, run 1 of ${config.runs}: job ${config.jobMs} ms, artifact ${config.artifactDelayMs} ms after it resolves, lock TTL ${config.lockTtlMs} ms`,
    );
    const svgPath = join(config.outDir, 'strategies.svg');
    writeFileSync(svgPath, svg);
    if (config.timelineCopy !== undefined) {
      mkdirSync(dirname(config.timelineCopy), { recursive: true });
      copyFileSync(svgPath, config.timelineCopy);
    }
    console.log(`\nwrote ${jsonPath}, ${svgPath}${config.timelineCopy ? ` and ${config.timelineCopy}` : ''}`);

    for (const note of verdict.notes) console.log(`note: ${note}`);
    for (const failure of verdict.failures) console.error(`FAIL: ${failure}`);
    const once = config.strategies.filter(mustFireOnce).join(' and ');
    if (verdict.failures.length === 0) console.log(`every prediction held in every run${once ? `: ${once} dispatched exactly once` : ''}.`);
    return verdict.failures.length === 0 ? 0 : 1;
  } finally {
    redis.disconnect();
    await connection.close();
    await native.close();
  }
}

const config = parseBenchArgs(process.argv);
quietTemporalLogs();
runMain(() => withRedisAndTemporal('bench:strategies', (redis, temporal) => bench(config, redis, temporal)));
