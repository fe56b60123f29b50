import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connectRedis, deletePrefix, testPrefix } from '../support/redis';
import { writeConsumer, type ConsumerVersions } from './consumer';
import { childEnv, lastJsonLine, run } from './run';

/**
 * The package as users get it: build, `npm pack`, install the tarball into a fresh project next
 * to the peer dependencies, then resolve, type-check, bundle and run a worker there. Nothing in
 * the fresh project can see this repository's sources or node_modules.
 */

const root = join(__dirname, '..', '..');
const rootPackage = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as {
  name: string;
  exports: Record<string, string | Record<string, string>>;
  dependencies: Record<string, string>;
  peerDependencies: Record<string, string>;
};

/** What `npm pack --json` reports for one package. */
interface PackReport {
  readonly filename: string;
  readonly files: readonly { readonly path: string }[];
}

/** The consumer installs the exact versions this repository was tested with, from npm's cache. */
function consumerVersions(): ConsumerVersions {
  const names = [
    '@temporalio/activity',
    '@temporalio/client',
    '@temporalio/common',
    '@temporalio/plugin',
    '@temporalio/proto',
    '@temporalio/worker',
    '@temporalio/workflow',
    'ioredis',
    '@types/node',
  ];
  const installed = (name: string) => (JSON.parse(readFileSync(join(root, 'node_modules', name, 'package.json'), 'utf8')) as { version: string }).version;
  return Object.fromEntries(names.map((name) => [name, installed(name)]));
}

/** Every file an exports map points at, e.g. `dist/workflow/index.d.ts`. */
function exportTargets(map: Record<string, string | Record<string, string>>): string[] {
  return Object.values(map)
    .flatMap((target) => (typeof target === 'string' ? [target] : Object.values(target)))
    .map((t) => t.replace(/^\.\//, ''));
}

const tsc = join(root, 'node_modules', 'typescript', 'bin', 'tsc');

/** The packages README's install line names, e.g. `['temporal-fire-once', 'ioredis', …]`. */
function readmeInstallNames(): string[] {
  const line = /## Install\n+```sh\n(npm install [^\n]+)\n```/.exec(readFileSync(join(root, 'README.md'), 'utf8'))?.[1];
  return (line ?? '').split(' ').slice(2);
}

describe("README's install line", () => {
  it("names every peer dependency, as Yarn's Plug'n'Play gives a package its peers only from the project's own dependencies", () => {
    // npm and pnpm install missing peers, and node_modules linkers hoist @temporalio/common and
    // @temporalio/proto from @temporalio/worker, so only a strict layout shows one missing.
    expect(Object.keys(rootPackage.peerDependencies).filter((name) => !readmeInstallNames().includes(name))).toEqual([]);
  });
});

describe('the packed package in a fresh project', () => {
  let workDir: string;
  let consumerDir: string;
  let packed: PackReport;

  beforeAll(async () => {
    workDir = mkdtempSync(join(tmpdir(), 'fire-once-package-'));
    consumerDir = join(workDir, 'consumer');
    await run('npm', ['run', 'build'], { cwd: root, timeoutMs: 120_000 });
    // The build ran above; --ignore-scripts keeps prepack from building a second time.
    const pack = await run('npm', ['pack', '--json', '--ignore-scripts', '--pack-destination', workDir], { cwd: root });
    packed = (JSON.parse(pack.stdout) as PackReport[])[0]!;
    writeConsumer(consumerDir, join(workDir, packed.filename), consumerVersions());
    await run('npm', ['install', '--prefer-offline', '--no-audit', '--no-fund'], { cwd: consumerDir, timeoutMs: 300_000 });
  }, 7 * 60_000);

  afterAll(() => {
    if (workDir) rmSync(workDir, { recursive: true, force: true });
  });

  it('packs the built JS, its .d.ts, the Lua scripts, LICENSE and README, and no sources or tests', () => {
    const files = packed.files.map((f) => f.path).sort();
    const lua = (dir: string) =>
      readdirSync(join(root, 'src', dir, 'scripts'))
        .filter((f) => f.endsWith('.lua'))
        .map((f) => `dist/${dir}/scripts/${f}`);
    const scripts = [...lua('core'), ...lua('cli')];
    expect(scripts.length).toBeGreaterThan(5);
    const required = [
      'package.json',
      'LICENSE',
      'README.md',
      ...exportTargets(rootPackage.exports),
      ...scripts,
      ...files.filter((f) => f.endsWith('.js')).map((f) => f.replace(/\.js$/, '.d.ts')),
    ];
    expect(required.filter((f) => !files.includes(f))).toEqual([]);
    expect(files.filter((f) => !f.startsWith('dist/') && !['LICENSE', 'README.md', 'PROTOCOL.md', 'package.json'].includes(f))).toEqual([]);
    expect(files.filter((f) => /\.test\.|(^|\/)(src|test|sample-workflows)\//.test(f))).toEqual([]);
    expect(files.filter((f) => f.endsWith('.ts') && !f.endsWith('.d.ts'))).toEqual([]);
  });

  it('requires at run time every dependency it declares, so that no install carries a package it never loads', () => {
    const dist = join(consumerDir, 'node_modules', rootPackage.name, 'dist');
    const code = readdirSync(dist, { recursive: true, encoding: 'utf8' })
      .filter((f) => f.endsWith('.js'))
      .map((f) => readFileSync(join(dist, f), 'utf8'))
      .join('\n');
    const required = new Set([...code.matchAll(/require\(["']((?:@[^/"']+\/)?[^/"']+)/g)].map((m) => m[1]));
    expect(Object.keys(rootPackage.dependencies).filter((name) => !required.has(name))).toEqual([]);
  });

  it('resolves every entry through the exports map to the built JS, for require and import', async () => {
    const cjs = lastJsonLine<{ resolved: Record<string, string>; exports: Record<string, string[]>; deepImport: string }>(
      await run('node', ['entries.js'], { cwd: consumerDir }),
    );
    const installed = join(consumerDir, 'node_modules', rootPackage.name);
    expect(cjs.resolved).toEqual({
      'temporal-fire-once': join(installed, 'dist', 'index.js'),
      'temporal-fire-once/core': join(installed, 'dist', 'core.js'),
      'temporal-fire-once/workflow': join(installed, 'dist', 'workflow', 'index.js'),
    });
    expect(cjs.exports['temporal-fire-once']).toEqual(expect.arrayContaining(['FireOncePlugin', 'fireOnce', 'FireOnce', 'FireOnceGuard']));
    expect(cjs.exports['temporal-fire-once/workflow']).toEqual(expect.arrayContaining(['setDispatchScope', 'getDispatchScope']));
    expect(cjs.exports['temporal-fire-once/core']).toEqual(expect.arrayContaining(['FireOnceKeys', 'createFireOnceActivityInterceptor', 'PROTOCOL_SCRIPTS']));
    // Internals stay behind the exports map.
    expect(cjs.deepImport).toBe('ERR_PACKAGE_PATH_NOT_EXPORTED');

    const esm = lastJsonLine<Record<string, string[]>>(await run('node', ['entries.mjs'], { cwd: consumerDir }));
    expect(esm).toEqual(cjs.exports);
  });

  it.each([
    ['nodenext', 'tsconfig.json'],
    ['node10', 'tsconfig.node10.json'],
  ])('type-checks a TypeScript consumer of every entry against the shipped .d.ts (%s resolution)', async (_resolution, config) => {
    await run('node', [tsc, '-p', config], { cwd: consumerDir });
  });

  it("loads every entry after README's install line when peers are not installed for it (yarn 1, npm --legacy-peer-deps)", async () => {
    // README's own line, each package at the version tested here so that npm's cache serves it.
    const names = readmeInstallNames();
    expect(names).toContain(rootPackage.name);
    const versions = consumerVersions();
    const specs = names.map((name) => (name === rootPackage.name ? join(workDir, packed.filename) : `${name}@${versions[name] ?? 'missing'}`));
    const dir = join(workDir, 'legacy-peers');
    mkdirSync(dir);
    writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: 'legacy-peers', version: '0.0.0', private: true }));
    await run('npm', ['install', '--legacy-peer-deps', '--prefer-offline', '--no-audit', '--no-fund', ...specs], { cwd: dir, timeoutMs: 180_000 });
    const load = `for (const e of ['', '/core', '/workflow']) require('${rootPackage.name}' + e); console.log('{}')`;
    await run('node', ['-e', load], { cwd: dir });
  }, 240_000);

  it('bundles a workflow that imports temporal-fire-once/workflow, with the plugin, and no ioredis', async () => {
    const { codePath } = lastJsonLine<{ codePath: string }>(await run('node', ['bundle.js'], { cwd: consumerDir, timeoutMs: 180_000 }));
    const code = readFileSync(codePath, 'utf8');
    // The workflow side of the package is in, through the entry and the plugin's interceptor module...
    expect(code).toContain('node_modules/temporal-fire-once/dist/workflow/scope.js');
    expect(code).toContain('node_modules/temporal-fire-once/dist/workflow/interceptors.js');
    // ...and nothing that needs Node or Redis.
    expect(code).not.toContain('node_modules/ioredis/');
    expect(code).not.toContain('node_modules/temporal-fire-once/dist/core/');
    expect(code).not.toContain('node_modules/temporal-fire-once/dist/worker/');
  }, 240_000);

  it('fires the activity once across two workflow runs that share a dispatch scope', async () => {
    const redis = connectRedis();
    const prefix = testPrefix('package');
    try {
      const output = await run('node', ['worker.js'], { cwd: consumerDir, env: childEnv({ KEY_PREFIX: prefix }), timeoutMs: 180_000 });
      const { results, dispatches } = lastJsonLine<{ results: string[]; dispatches: number }>(output);
      expect(dispatches).toBe(1);
      expect(results).toEqual(['job 1 for turn 1', 'job 1 for turn 1']);
      expect(await redis.get(`${prefix}:dispatches`)).toBe('1');
      // The installed `fire-once` bin reads that worker's dispatch log: one dispatch, no duplicate.
      const cli = join(consumerDir, 'node_modules', '.bin', 'fire-once');
      const { stdout } = await run(cli, ['report', '--json', '--prefix', prefix, '--redis', process.env.REDIS_URL as string], { cwd: consumerDir });
      const report = JSON.parse(stdout) as { byJobType: { counts: Record<string, number> }[]; duplicates: unknown[] };
      expect(report.byJobType.map((j) => j.counts.dispatched)).toEqual([1]);
      expect(report.duplicates).toEqual([]);
    } finally {
      await deletePrefix(redis, prefix);
      redis.disconnect();
    }
  }, 240_000);
});
