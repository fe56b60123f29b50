import { mkdirSync, mkdtempSync, realpathSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { RELEASE_0_8_0, RELEASE_CACHE, buildUsable, releaseBuildDir } from '../support/release-build';

// The compat suites run an earlier release built into a cache, linked to a checkout's
// node_modules. A build linked to another checkout's modules ran two copies of the Temporal SDK
// side by side, and the fleet's results no longer matched (the CI of 0f0f2cf): only a build
// linked to this checkout's own is used.

describe('the release builds of test/compat', () => {
  let dir: string;
  const release = RELEASE_0_8_0;
  const ours = join(__dirname, '..', '..', 'node_modules');

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'fire-once-release-cache-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  /** A build of `commit` in `dir/build`, its node_modules linked to `modules`. */
  function plant(commit: string, modules: string): string {
    const build = join(dir, 'build');
    mkdirSync(join(build, 'dist'), { recursive: true });
    writeFileSync(join(build, 'dist', '.built'), `${commit}\n`);
    symlinkSync(modules, join(build, 'node_modules'), 'dir');
    return build;
  }

  it("live under this checkout's node_modules, which npm ci clears with them", () => {
    expect(RELEASE_CACHE.startsWith(`${realpathSync(ours)}/`) || RELEASE_CACHE.startsWith(`${ours}/`)).toBe(true);
  });

  it("a build of the release's commit linked to this checkout's node_modules is used", () => {
    expect(buildUsable(plant(release.commit, ours), release)).toBe(true);
  });

  it("a build linked to another checkout's node_modules is not used", () => {
    const other = join(dir, 'other-checkout', 'node_modules');
    mkdirSync(other, { recursive: true });
    expect(buildUsable(plant(release.commit, other), release)).toBe(false);
  });

  it('a build whose linked node_modules is gone, of another commit, or cut short before its mark is not used', () => {
    expect(buildUsable(plant(release.commit, join(dir, 'removed-clone', 'node_modules')), release)).toBe(false);
    rmSync(join(dir, 'build'), { recursive: true });
    expect(buildUsable(plant('0'.repeat(40), ours), release)).toBe(false);
    rmSync(join(dir, 'build', 'dist', '.built'));
    expect(buildUsable(join(dir, 'build'), release)).toBe(false);
  });

  it('of a checkout that moved are built under another name, so that no build is replaced under a test that loads it', () => {
    const moved = join(dir, 'moved-checkout', 'node_modules');
    mkdirSync(moved, { recursive: true });
    expect(releaseBuildDir(release)).toBe(releaseBuildDir(release, ours));
    expect(releaseBuildDir(release, moved)).not.toBe(releaseBuildDir(release, ours));
    expect(releaseBuildDir(release, moved).startsWith(`${RELEASE_CACHE}/${release.version}-`)).toBe(true);
  });
});
