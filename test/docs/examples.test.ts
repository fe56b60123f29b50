import { mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import ts from 'typescript';

// The TSDoc of the public surface cannot drift: every value export of both entry points has an
// @example, every type export has a doc comment, and every @example in src/ type-checks against
// the real source, with the package's own import names.
const ROOT = join(__dirname, '..', '..');
const ENTRIES = { 'temporal-fire-once': 'src/index.ts', 'temporal-fire-once/core': 'src/core.ts', 'temporal-fire-once/workflow': 'src/workflow/index.ts' };

function program(files: string[], paths: Record<string, string[]> = {}, module = ts.ModuleKind.CommonJS): ts.Program {
  return ts.createProgram(files, {
    target: ts.ScriptTarget.ES2022,
    module,
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
    expect(typeErrors(dir, files)).toEqual([]);
  });

  // The README's and the docs' TypeScript blocks are what users paste: each type-checks as a module
  // of its own (top-level await allowed), against the real source. What a block leaves to the
  // reader (its activities, your Redis client, your store) is declared once in SNIPPET_GLOBALS; a
  // block whose first line is a file name (`// worker.ts`) is written under that name, so the
  // README's workflows.ts imports the types of its worker.ts.
  it('every TypeScript block of README.md and docs/ type-checks against the source', () => {
    const dir = join(ROOT, '.tmp', 'snippets');
    rmSync(dir, { recursive: true, force: true });
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'globals.d.ts'), SNIPPET_GLOBALS);
    const files = [join(dir, 'globals.d.ts')];
    const docsFiles = ['README.md', ...readdirSync(join(ROOT, 'docs')).map((f) => `docs/${f}`)].filter((f) => f.endsWith('.md'));
    for (const doc of docsFiles) {
      [...readFileSync(join(ROOT, doc), 'utf8').matchAll(/^```(?:ts|typescript)\n([\s\S]*?)^```$/gm)].forEach((block, i) => {
        const named = /^\/\/ ([\w-]+)\.ts\n/.exec(block[1]);
        const out = join(dir, named ? `${named[1]}.ts` : `${doc.replace(/[/.]/g, '_')}_${i + 1}.ts`);
        writeFileSync(out, `${block[1]}\nexport {};\n`);
        files.push(out);
      });
    }
    expect(files.length).toBeGreaterThan(10);
    expect(typeErrors(dir, files, ts.ModuleKind.ES2022)).toEqual([]);
  });
});

const SNIPPET_GLOBALS = `
declare function callTheSlowModel(sessionId: string): Promise<string>;
declare function sendPush(text: string): Promise<void>;
declare const temporalAddress: string;
declare const apiKey: string;
declare const namespace: string;
declare const workflowsPath: string;
declare const activities: Record<string, (...args: never[]) => Promise<unknown>>;
declare const redis: import('ioredis').Redis;
declare const plugin: import('temporal-fire-once').FireOncePlugin;
declare const fireOnce: typeof import('temporal-fire-once').fireOnce;
declare const fireOnceContext: typeof import('temporal-fire-once').fireOnceContext;
declare const bundleWorkflowCode: typeof import('@temporalio/worker').bundleWorkflowCode;
interface Doc { readonly id: string }
interface Report { readonly id: string }
declare const reports: { build(id: string): Promise<Report> };
declare const store: { put(doc: Doc, options: { fencingToken: number; signal: AbortSignal }): Promise<void> };
`;

/** The type errors of `files` (modules under `dir`, importing the package by its own names). */
function typeErrors(dir: string, files: string[], module?: ts.ModuleKind): string[] {
  const paths = Object.fromEntries(Object.entries(ENTRIES).map(([name, file]) => [name, [file]]));
  const diagnostics = ts.getPreEmitDiagnostics(program(files, paths, module)).filter((d) => d.file && d.file.fileName.startsWith(dir));
  return diagnostics.map((d) => {
    const { line } = d.file!.getLineAndCharacterOfPosition(d.start ?? 0);
    return `${relative(dir, d.file!.fileName)}:${line + 1}: ${ts.flattenDiagnosticMessageText(d.messageText, '\n')}`;
  });
}
