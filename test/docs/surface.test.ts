import { join } from 'node:path';
import ts from 'typescript';

// The public surface is a promise: this list changes only on purpose. Every name each entry point
// exports, values and types alike, as TypeScript sees it.
const ROOT = join(__dirname, '..', '..');
const SURFACE: Record<string, readonly string[]> = {
  'src/index.ts': [
    'AcquireOutcome',
    'DispatchTarget',
    'FIRE_ONCE_DEFAULTS',
    'FireOnce',
    'FireOnceArtifactTooLarge',
    'FireOnceConfigError',
    'FireOnceContext',
    'FireOnceCorruptArtifact',
    'FireOnceError',
    'FireOnceGuard',
    'FireOnceGuardOptions',
    'FireOnceInFlight',
    'FireOnceInvalidId',
    'FireOnceKeyConflict',
    'FireOnceLockLost',
    'FireOnceMissingScope',
    'FireOnceOptions',
    'FireOncePlugin',
    'FireOncePluginOptions',
    'FireOnceProtocolError',
    'FireOnceStoreUnavailable',
    'FireOnceUnstorableResult',
    'Lease',
    'fireOnce',
    'fireOnceContext',
  ],
  'src/workflow/index.ts': ['SCOPE_HEADER', 'getDispatchScope', 'setDispatchScope'],
};

function exportNames(file: string): string[] {
  const program = ts.createProgram([join(ROOT, file)], { strict: true, skipLibCheck: true, noEmit: true, types: ['node'] });
  const checker = program.getTypeChecker();
  const moduleSymbol = checker.getSymbolAtLocation(program.getSourceFile(join(ROOT, file))!)!;
  return checker
    .getExportsOfModule(moduleSymbol)
    .map((s) => s.getName())
    .sort();
}

describe('public surface', () => {
  it.each(Object.entries(SURFACE))('%s exports exactly the pinned names', (file, names) => {
    expect(exportNames(file)).toEqual([...names].sort());
  });

  it('keeps the package root small: about twenty names, the rest on temporal-fire-once/core', () => {
    expect(SURFACE['src/index.ts'].length).toBeLessThanOrEqual(25);
  });
});
