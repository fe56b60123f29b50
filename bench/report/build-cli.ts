import { execFileSync } from 'node:child_process';
import { copyFileSync, mkdtempSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const ROOT = join(__dirname, '..', '..');

/**
 * Compile the package as `npm run build` does, but into a private temp folder, so that the bench
 * times the same JavaScript `npx fire-once` runs without racing anyone rebuilding `dist/`.
 * Returns the path of `dist/cli/main.js` there; its `node_modules` is a link to the repo's.
 */
export function buildCli(): { main: string; dir: string } {
  const dir = mkdtempSync(join(tmpdir(), 'fire-once-bench-report-'));
  const tsc = join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');
  execFileSync(process.execPath, [tsc, '-p', join(ROOT, 'tsconfig.build.json'), '--outDir', join(dir, 'dist')], { stdio: 'inherit' });
  execFileSync(process.execPath, [join(ROOT, 'scripts', 'copy-lua.js'), join(dir, 'dist')], { stdio: 'inherit' });
  copyFileSync(join(ROOT, 'package.json'), join(dir, 'package.json'));
  symlinkSync(join(ROOT, 'node_modules'), join(dir, 'node_modules'), 'dir');
  return { main: join(dir, 'dist', 'cli', 'main.js'), dir };
}
