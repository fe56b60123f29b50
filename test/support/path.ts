import { existsSync, mkdtempSync, readdirSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';

/** A PATH that cannot find some binaries, and how to remove what it took to build it. */
export interface StrippedPath {
  readonly path: string;
  cleanup(): void;
}

/**
 * This process's PATH, less `binaries`: every PATH directory that holds one of them is replaced
 * by a temporary directory of symlinks to everything else in it. Nothing on the machine changes,
 * so a child given this PATH runs as on a machine without them.
 *
 * @example
 * ```ts
 * const stripped = pathWithout(['redis-server']);
 * // spawn(..., { env: { ...process.env, PATH: stripped.path } }); then stripped.cleanup();
 * ```
 */
export function pathWithout(binaries: readonly string[], path = process.env.PATH ?? ''): StrippedPath {
  const made: string[] = [];
  const dirs = path
    .split(delimiter)
    .filter((dir) => dir !== '')
    .map((dir) => {
      if (!binaries.some((binary) => existsSync(join(dir, binary)))) return dir;
      const copy = mkdtempSync(join(tmpdir(), 'fire-once-path-'));
      made.push(copy);
      for (const name of readdirSync(dir)) if (!binaries.includes(name)) symlinkSync(join(dir, name), join(copy, name));
      return copy;
    });
  return {
    path: dirs.join(delimiter),
    cleanup: () => {
      for (const dir of made) rmSync(dir, { recursive: true, force: true });
    },
  };
}
