import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import ts from 'typescript';

// The TSDoc of the public surface cannot drift: every value export of both entry points has an
// @example, every type export has a doc comment, and every @example in src/ type-checks against
// the real source, with the package's own import names.
const ROOT = join(__dirname, '..', '..');
const ENTRIES = { 'temporal-fire-once': 'src/index.ts', 'temporal-fire-once/core': 'src/core.ts', 'temporal-fire-once/workflow': 'src/workflow/index.ts' };

function program(files: string[], paths: Record<string, string[]> = {}): ts.Program {
  return ts.createProgram(files, {
    target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.CommonJS,
    moduleResolution: ts.ModuleResolutionKind.Node10,
    lib: ['lib.es2022.d.ts', 'lib.es2024.string.d.ts', 'lib.esnext.decorators.d.ts'],
    strict: true,
    esModuleInterop: true,
    skipLibCheck: true,
    noEmit: true,
    types: ['node'],
    baseUrl: ROOT,
    paths,
  });
}

/** The public exports of one entry point, with their resolved declarations. */
function exportsOf(checker: ts.TypeChecker, source: ts.SourceFile) {
  const moduleSymbol = checker.getSymbolAtLocation(source);
  if (!moduleSymbol) throw new Error(`no module symbol for ${source.fileName}`);
  return checker.getExportsOfModule(moduleSymbol).map((symbol) => {
    const target = symbol.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(symbol) : symbol;
    return { name: symbol.getName(), target, declarations: target.getDeclarations() ?? [] };
  });
}

function docs(declaration: ts.Declaration): { hasDoc: boolean; hasExample: boolean } {
  const node = ts.isVariableDeclaration(declaration) ? declaration.parent.parent : declaration;
  const jsDoc = (node as { jsDoc?: ts.JSDoc[] }).jsDoc ?? [];
  return { hasDoc: jsDoc.length > 0, hasExample: ts.getJSDocTags(node).some((t) => t.tagName.text === 'example') };
}

describe('public API documentation', () => {
  const entryFiles = Object.values(ENTRIES).map((f) => join(ROOT, f));
  const prog = program(entryFiles);
  const checker = prog.getTypeChecker();

  it.each(Object.entries(ENTRIES))('%s: every value export has an @example, every type export a doc comment', (_name, file) => {
    const missing: string[] = [];
    for (const { name, target, declarations } of exportsOf(checker, prog.getSourceFile(join(ROOT, file))!)) {
      const isValue = (target.flags & ts.SymbolFlags.Value) !== 0;
      const documented = declarations.map(docs);
      if (isValue && !documented.some((d) => d.hasExample)) missing.push(`${name} (no @example)`);
      if (!isValue && !documented.some((d) => d.hasDoc)) missing.push(`${name} (no doc comment)`);
    }
    expect(missing).toEqual([]);
  });

  it('every @example in src/ type-checks against the source', () => {
    const dir = join(ROOT, '.tmp', 'examples');
    rmSync(dir, { recursive: true, force: true });
    mkdirSync(dir, { recursive: true });
    const files: string[] = [];
    for (const source of prog.getSourceFiles().filter((f) => f.fileName.startsWith(join(ROOT, 'src')))) {
      const text = source.getFullText();
      const examples = text.split('@example').length - 1;
      const blocks = [...text.matchAll(/@example\s*\n\s*\*\s*```ts\n([\s\S]*?)\n\s*\*\s*```/g)];
      if (blocks.length !== examples) throw new Error(`${relative(ROOT, source.fileName)}: an @example does not start with a \`\`\`ts block`);
      blocks.forEach((block, i) => {
        const code = block[1]
          .split('\n')
          .map((line) => line.replace(/^\s*\* ?/, ''))
          .join('\n');
        const out = join(dir, `${relative(ROOT, source.fileName).replace(/[/.]/g, '_')}_${i + 1}.ts`);
        writeFileSync(out, `${code}\nexport {};\n`);
        files.push(out);
      });
    }
    expect(files.length).toBeGreaterThan(10);
    const paths = Object.fromEntries(Object.entries(ENTRIES).map(([name, file]) => [name, [file]]));
    const diagnostics = ts.getPreEmitDiagnostics(program(files, paths)).filter((d) => d.file && d.file.fileName.startsWith(dir));
    const messages = diagnostics.map((d) => {
      const { line } = d.file!.getLineAndCharacterOfPosition(d.start ?? 0);
      return `${relative(dir, d.file!.fileName)}:${line + 1}: ${ts.flattenDiagnosticMessageText(d.messageText, '\n')}`;
    });
    expect(messages).toEqual([]);
  });
});
