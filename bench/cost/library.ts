// The cost bench measures the package as users run it: the compiled JavaScript that
// `npm run build` writes to dist/ (the `bench:cost` scripts build first), not the TypeScript
// sources as tsx transpiles them on the fly, which adds helper calls of its own to every call.
// The types still come from src/, so the type-check needs no build.
import type * as Package from '../../src';
import type * as Core from '../../src/core';

function load<T>(entry: string): T {
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports -- loaded at run time, so the type-check needs no build
    return require(entry) as T;
  } catch (err) {
    throw new Error(`the cost bench runs the compiled package: run \`npm run build\` first (${(err as Error).message})`);
  }
}

const built = load<typeof Package>('../../dist');

export const FireOnceGuard = built.FireOnceGuard;
export type FireOnceGuard = Package.FireOnceGuard;
export const FireOncePlugin = built.FireOncePlugin;
export const fireOnce = built.fireOnce;
export const PROTOCOL_SCRIPTS = load<typeof Core>('../../dist/core').PROTOCOL_SCRIPTS;
