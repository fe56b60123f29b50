import { execFile, execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, realpathSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';

const ROOT = join(__dirname, '..', '..');
const run = promisify(execFile);

/** An earlier release, by the commit that released it (docs/upgrading.md). */
export interface Release {
  readonly version: string;
  readonly commit: string;
}

/** 0.8.0, npm and Python: the release before 0.9.0. */
export const RELEASE_0_8_0: Release = Object.freeze({ version: '0.8.0', commit: '7bab1c5fa322d25ac86ac90d8c6ba26e5e604bc7' });

/**
 * 0.9.0, npm and Python: the release before 0.10.0. Its last code, after "Version 0.9.0"
 * (49d0fc5) and before the hand-off-cancel patch: the commit users upgrade from.
 */
export const RELEASE_0_9_0: Release = Object.freeze({ version: '0.9.0', commit: 'bdfbdad34d479a1a8b29253932637607e9eff521' });

/** 0.10.0, npm and Python: the release before 0.11.0, by its last commit. */
export const RELEASE_0_10_0: Release = Object.freeze({ version: '0.10.0', commit: '0f0f2cfdeb71a9ee629dc76552699601897f2b97' });

/** Every earlier release whose recorded histories (test/fixtures/histories-<version>) HEAD replays, oldest first. */
export const RECORDED_RELEASES: readonly Release[] = Object.freeze([RELEASE_0_8_0, RELEASE_0_9_0, RELEASE_0_10_0]);

/** A release compiled from this repository's git history: what a worker of that release runs. */
export interface ReleaseBuild extends Release {
  /** The build's root: `src/`, `python/`, the compiled `dist/`, and `node_modules` linked to this checkout's. */
  readonly dir: string;
  /** One of the package's entries (`index`, `core`, `workflow`), compiled, by absolute path. */
  entry(name: Entry): string;
  /** That entry, loaded: what `import 'temporal-fire-once'` (or `/core`, `/workflow`) gives a user of the release. */
  load(name: Entry): Promise<unknown>;
}

type Entry = 'index' | 'core' | 'workflow';

/**
 * Why `release` cannot be built from this checkout (a shallow clone, or no git), or `undefined`
 * when it can. A test that needs the build says this and skips; CI runs on a full clone of main.
 */
export function releaseUnavailable(release: Release): string | undefined {
  try {
    execFileSync('git', ['cat-file', '-e', `${release.commit}^{commit}`], { cwd: ROOT, stdio: ['ignore', 'ignore', 'pipe'] });
    return undefined;
  } catch (err) {
    return `the git history holds no commit ${release.commit} (release ${release.version}): ${(err as Error).message.trim()}; fetch the history (git fetch --unshallow) to run this test`;
  }
}

/**
 * Where this checkout keeps its release builds: under its own `node_modules`, which every build
 * links to, so that `npm ci` clears both at once. A cache in the system's temporary directory
 * was shared by every checkout on the machine and kept the link of the first to build: a run from
 * another clone loaded that clone's `@temporalio` modules next to its own, and the fleet's results
 * no longer matched (the CI of 0f0f2cf, on a clone whose cache an earlier clone had built).
 */
export const RELEASE_CACHE = join(ROOT, 'node_modules', '.cache', 'temporal-fire-once-releases');

/**
 * Whether `dir` holds a whole build of `release` that runs against this checkout's modules: its
 * `dist` is marked built from the release's commit, and its `node_modules` link resolves to this
 * checkout's `node_modules`.
 */
export function buildUsable(dir: string, release: Release): boolean {
  try {
    return (
      readFileSync(join(dir, 'dist', '.built'), 'utf8').trim() === release.commit &&
      realpathSync(join(dir, 'node_modules')) === realpathSync(join(ROOT, 'node_modules'))
    );
  } catch {
    return false; // no build, or a link to a directory that is gone
  }
}

/**
 * The directory of `release`'s build for the checkout whose `node_modules` is `modules`: named by
 * that directory's real path too, so that a checkout that moved (its builds' links now lead
 * nowhere) builds under a new name. A build that landed is therefore never replaced while another
 * test file may be loading it: two jest workers that both found a moved checkout's stale build
 * used to race, one deleting the build the other had just put in its place.
 */
export function releaseBuildDir(release: Release, modules = join(ROOT, 'node_modules')): string {
  const checkout = createHash('sha256').update(realpathSync(modules)).digest('hex').slice(0, 12);
  return join(RELEASE_CACHE, `${release.version}-${release.commit.slice(0, 12)}-${checkout}`);
}

/**
 * Compile `release` from git history once into {@link RELEASE_CACHE}, shared by every test and
 * run of this checkout that asks for the same commit: its files by `git archive`, this
 * checkout's `node_modules` linked in (so the release runs against the same Temporal SDK and
 * ioredis modules as the test), its TypeScript compiled without a type check (it was checked when
 * it was released), and its Lua scripts copied next to the output. About 10 s; the build goes to
 * a directory of its own and is renamed into place, so two test files building at once both end
 * with a whole build, in a directory of its checkout's ({@link releaseBuildDir}). A build there
 * that is not {@link buildUsable} (cut short) is built again.
 */
export async function buildRelease(release: Release): Promise<ReleaseBuild> {
  const dir = releaseBuildDir(release);
  if (!buildUsable(dir, release)) {
    const problem = releaseUnavailable(release);
    if (problem !== undefined) throw new Error(`cannot build release ${release.version}: ${problem}`);
    const staging = `${dir}.${process.pid}-${Date.now()}`;
    mkdirSync(staging, { recursive: true });
    try {
      const paths = ['src', 'scripts', 'python', 'tsconfig.json', 'tsconfig.build.json', 'package.json'];
      const archive = join(staging, 'release.tar');
      await run('git', ['archive', '--format=tar', '-o', archive, release.commit, ...paths], { cwd: ROOT });
      await run('tar', ['-xf', archive, '-C', staging]);
      rmSync(archive);
      symlinkSync(realpathSync(join(ROOT, 'node_modules')), join(staging, 'node_modules'), 'dir');
      const tsc = join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');
      await run(process.execPath, [tsc, '-p', 'tsconfig.build.json', '--noCheck', '--declaration', 'false'], { cwd: staging });
      await run(process.execPath, [join('scripts', 'copy-lua.js'), 'dist'], { cwd: staging });
      writeFileSync(join(staging, 'dist', '.built'), `${release.commit}\n`);
      if (existsSync(dir) && !buildUsable(dir, release)) rmSync(dir, { recursive: true, force: true });
      try {
        renameSync(staging, dir);
      } catch (err) {
        if (!buildUsable(dir, release)) throw err; // another build landed first: keep it
      }
    } finally {
      rmSync(staging, { recursive: true, force: true });
    }
  }
  const version = (JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as { version: string }).version;
  if (version !== release.version) throw new Error(`the build of ${release.commit} in ${dir} is version ${version}, not ${release.version}`);
  const entry = (name: Entry) => join(dir, 'dist', name === 'workflow' ? join('workflow', 'index.js') : `${name}.js`);
  return { ...release, dir, entry, load: (name) => import(entry(name)) };
}
