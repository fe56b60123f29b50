import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';

/**
 * The files of a fresh consumer project that depends on the packed tarball, written the way a
 * user would: TypeScript workflows and a type-checked module that imports both entries, and
 * plain Node scripts that resolve the entries, bundle the workflows and run a worker.
 *
 * They live here as strings, not as files under test/, because the repository's own tsconfig
 * type-checks everything under test/ and cannot resolve `temporal-fire-once` by name.
 */

/** Exact versions of the consumer's dependencies, besides the tarball. */
export type ConsumerVersions = Readonly<Record<string, string>>;

/** Write the consumer project into `dir`. */
export function writeConsumer(dir: string, tarball: string, versions: ConsumerVersions): void {
  const { '@types/node': typesNode, ...dependencies } = versions;
  const files: Record<string, string> = {
    'package.json': JSON.stringify(
      {
        name: 'fire-once-consumer',
        version: '0.0.0',
        private: true,
        dependencies: { 'temporal-fire-once': `file:${tarball}`, ...dependencies },
        devDependencies: { '@types/node': typesNode },
      },
      null,
      2,
    ),
    // How a Node 20 CommonJS project is set up today: resolution through the exports map.
    'tsconfig.json': JSON.stringify(
      {
        compilerOptions: {
          target: 'ES2022',
          module: 'nodenext',
          moduleResolution: 'nodenext',
          strict: true,
          noEmit: true,
          // As the @tsconfig/node* bases that Temporal's samples extend: without it, @temporalio/common's
          // own .d.ts fails for want of @types/ms.
          skipLibCheck: true,
          types: ['node'],
        },
        include: ['src'],
      },
      null,
      2,
    ),
    // The classic setup: `module: commonjs` alone means node10 resolution, which ignores the
    // exports map; @tsconfig/node14 and the Temporal samples built on it use it.
    'tsconfig.node10.json': JSON.stringify({ extends: './tsconfig.json', compilerOptions: { module: 'commonjs', moduleResolution: 'node10' } }, null, 2),
    'src/workflows.ts': WORKFLOWS_TS,
    'src/check.ts': CHECK_TS,
    'entries.js': ENTRIES_JS,
    'entries.mjs': ENTRIES_MJS,
    'bundle.js': BUNDLE_JS,
    'worker.js': WORKER_JS,
  };
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(dirname(join(dir, path)), { recursive: true });
    writeFileSync(join(dir, path), `${text.trim()}\n`);
  }
}

/** The workflow: bundled by bundle.js, run by worker.js, type-checked with the rest of src/. */
const WORKFLOWS_TS = `
import { proxyActivities } from '@temporalio/workflow';
import { setDispatchScope } from 'temporal-fire-once/workflow';

const { dispatchJob } = proxyActivities<{ dispatchJob(text: string): Promise<string> }>({
  startToCloseTimeout: '1 minute',
});

export async function chatTurn(sessionId: string, text: string): Promise<string> {
  setDispatchScope(sessionId);
  return await dispatchJob(text);
}
`;

/** Uses the public types of every entry; compiled with tsc --noEmit only. */
const CHECK_TS = `
import { Redis } from 'ioredis';
import { FIRE_ONCE_DEFAULTS, FireOncePlugin, fireOnce } from 'temporal-fire-once';
import { FireOnceKeys, type ValueFireOnceOptions } from 'temporal-fire-once/core';
import { getDispatchScope, setDispatchScope } from 'temporal-fire-once/workflow';

const redis = new Redis({ lazyConnect: true });
export const plugin: FireOncePlugin = new FireOncePlugin({ redis, keyPrefix: 'consumer', lockTtlMs: FIRE_ONCE_DEFAULTS.lockTtlMs });

const options: ValueFireOnceOptions<[string]> = { jobType: 'summary', scope: ([sessionId]) => sessionId };
export const activities = {
  summarise: fireOnce(async (sessionId: string): Promise<string> => \`summary of \${sessionId}\`, options),
};
export const summary: Promise<string> = activities.summarise('session-1');
export const lockKey: string = new FireOnceKeys('consumer').lock('session-1', 'summarise');

// 'skip' resolves undefined without running, so the declarations only allow it on Promise<void>.
// @ts-expect-error a value-returning activity cannot skip
fireOnce(async (): Promise<string> => 'value', { onInFlight: 'skip' });

export function scoped(): string | undefined {
  setDispatchScope('session-1');
  return getDispatchScope();
}
`;

/** Where each entry resolves, and what it exports, through require. */
const ENTRIES_JS = `
const report = { resolved: {}, exports: {}, deepImport: null };
for (const name of ['temporal-fire-once', 'temporal-fire-once/core', 'temporal-fire-once/workflow']) {
  report.resolved[name] = require.resolve(name);
  report.exports[name] = Object.keys(require(name)).filter((k) => k !== '__esModule').sort();
}
try {
  require('temporal-fire-once/dist/core/guard');
  report.deepImport = 'resolved';
} catch (err) {
  report.deepImport = err.code;
}
console.log(JSON.stringify(report));
`;

/** The named exports an ES module sees. */
const ENTRIES_MJS = `
const names = (module) => Object.keys(module).filter((k) => k !== 'default' && k !== '__esModule').sort();
const main = await import('temporal-fire-once');
const core = await import('temporal-fire-once/core');
const workflow = await import('temporal-fire-once/workflow');
console.log(JSON.stringify({
  'temporal-fire-once': names(main),
  'temporal-fire-once/core': names(core),
  'temporal-fire-once/workflow': names(workflow),
}));
`;

/** Bundle src/workflows.ts with the plugin, as a worker or a build step would. */
const BUNDLE_JS = `
const { writeFileSync } = require('node:fs');
const { join } = require('node:path');
const { bundleWorkflowCode } = require('@temporalio/worker');
const { FireOncePlugin } = require('temporal-fire-once');
const { Redis } = require('ioredis');

async function main() {
  const redis = new Redis(process.env.REDIS_URL, { lazyConnect: true });
  const { code } = await bundleWorkflowCode({
    workflowsPath: join(__dirname, 'src', 'workflows.ts'),
    plugins: [new FireOncePlugin({ redis })],
  });
  const codePath = join(__dirname, 'workflow-bundle.js');
  writeFileSync(codePath, code);
  redis.disconnect();
  console.log(JSON.stringify({ codePath, bytes: code.length }));
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
`;

/**
 * A worker with the plugin and the prebuilt bundle runs chatTurn twice, as two workflows that
 * share one dispatch scope. The activity body counts its runs with an INCR the guard does not own.
 */
const WORKER_JS = `
const { join } = require('node:path');
const { NativeConnection, Worker } = require('@temporalio/worker');
const { Client, Connection } = require('@temporalio/client');
const { FireOncePlugin, fireOnce } = require('temporal-fire-once');
const { Redis } = require('ioredis');

async function main() {
  const { REDIS_URL, TEMPORAL_ADDRESS, KEY_PREFIX } = process.env;
  const redis = new Redis(REDIS_URL);
  const counter = KEY_PREFIX + ':dispatches';
  const activities = {
    // Each turn's text differs but the job is the session's: let later turns share its result.
    dispatchJob: fireOnce(
      async (text) => {
        const n = await redis.incr(counter);
        return 'job ' + n + ' for ' + text;
      },
      { onConflict: 'ignore' },
    ),
  };
  const taskQueue = KEY_PREFIX;
  const connection = await NativeConnection.connect({ address: TEMPORAL_ADDRESS });
  const clientConnection = await Connection.connect({ address: TEMPORAL_ADDRESS });
  const client = new Client({ connection: clientConnection });
  try {
    const worker = await Worker.create({
      connection,
      taskQueue,
      activities,
      workflowBundle: { codePath: join(__dirname, 'workflow-bundle.js') },
      plugins: [new FireOncePlugin({ redis, keyPrefix: KEY_PREFIX })],
    });
    const results = await worker.runUntil(async () => {
      const out = [];
      for (const turn of [1, 2]) {
        out.push(
          await client.workflow.execute('chatTurn', {
            taskQueue,
            workflowId: KEY_PREFIX + '-turn-' + turn,
            args: ['session-1', 'turn ' + turn],
          }),
        );
      }
      return out;
    });
    const dispatches = Number(await redis.get(counter));
    console.log(JSON.stringify({ results, dispatches }));
  } finally {
    await clientConnection.close();
    await connection.close();
    redis.disconnect();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
`;
