import { readFileSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { basename, join } from 'node:path';

// The docs back each claim with a test, named after its file: `test/x.test.ts` "name …" or
// `x.test.ts` › *name*. A renamed or deleted test leaves the claim unbacked while the citation
// still reads as proof, so every cited name must still be in a file of that name. A name ending
// in "…" is a prefix; `%s` and the like in a test's own name (it.each) match any text.
const root = join(__dirname, '..', '..');
const tracked = execFileSync('git', ['ls-files'], { cwd: root, encoding: 'utf8' }).split('\n').filter(Boolean);
const docs = tracked.filter((file) => file.endsWith('.md'));
const testFiles = new Map<string, string[]>();
for (const file of tracked.filter((f) => /\.(test|fault|cluster-test)\.ts$|-guarantees\.ts$|(^|\/)test_\w+\.py$/.test(f))) {
  testFiles.set(basename(file), [...(testFiles.get(basename(file)) ?? []), file]);
}

/** Quotes and spaces as both the docs and the test sources may write them. */
const plain = (text: string) =>
  text
    .replace(/[‘’]/g, "'")
    .replace(/[“”]/g, '"')
    .replace(/\\(['"`])/g, '$1')
    .replace(/\s+/g, ' ');

/** Each citation in `doc`: the file's base name and the test name as cited. */
function citations(doc: string): { file: string; name: string }[] {
  const found: { file: string; name: string }[] = [];
  const cite =
    /([\w.-]+\.(?:test|fault|cluster-test)\.ts|[\w-]+-guarantees\.ts|test_\w+\.py)`?(?:\]\([^)]*\))?((?:\s*›?\s*(?:"[^"]+"|\*[^*\n]+\*)(?:\s*\([^()]*\))?[,;]?(?:\s*(?:and|or)\s)?)+)/g;
  for (const [, file, names] of readFileSync(join(root, doc), 'utf8').matchAll(cite)) {
    for (const [, quoted, starred] of names.matchAll(/"([^"]+)"|\*([^*\n]+)\*/g)) {
      const name = plain((quoted ?? starred).split('…')[0])
        .trim()
        .replace(/,$/, ''); // a name may wrap a line
      if (name.length >= 12) found.push({ file, name });
    }
  }
  return found;
}

/**
 * Whether `source` has a test of that name: the name itself, or a parametrised title (`%s`, `$x`
 * for each row's values) whose text before the first placeholder begins the name, or is begun by
 * it (a cited name cut short with "…").
 */
function cites(source: string, name: string): boolean {
  if (plain(source).includes(name)) return true;
  for (const [, , title] of source.matchAll(/(['"`])((?:(?!\1)[^\n])*?(?:%[sdjpio#]|\$\w+)(?:(?!\1)[^\n])*)\1/g)) {
    const parts = plain(title).split(/%[sdjpio#]|\$\w+/);
    const [head] = parts;
    if (head.length >= 12 ? name.startsWith(head) || head.startsWith(name) : parts.some((part) => part.length >= 12 && name.includes(part))) return true;
  }
  return false;
}

describe('docs cite tests that exist', () => {
  const all = docs.flatMap((doc) => citations(doc).map((c) => ({ doc, ...c })));

  it('finds the citations it checks', () => {
    expect(all.length).toBeGreaterThan(100);
  });

  it('every cited test name is in a test file of that name', () => {
    const missing = all.flatMap(({ doc, file, name }) => {
      const paths = testFiles.get(file);
      if (paths === undefined) return [`${doc}: no test file ${file}`];
      const source = paths.map((p) => readFileSync(join(root, p), 'utf8')).join('\n');
      return cites(source, plain(name)) ? [] : [`${doc}: ${file} has no test "${name}"`];
    });
    expect(missing).toEqual([]);
  });

  it('every test file the docs name, cited or not, is tracked', () => {
    // A file named in a table, a link or a list, with no test name after it, is not a citation
    // above, yet reads as proof all the same (a deleted test file stayed linked this way).
    const named = /(?:[\w.-]+\/)*(?:[\w.-]+\.(?:test|fault|cluster-test)\.ts|[\w-]+-guarantees\.ts|test_\w+\.py)\b/g;
    const missing = docs.flatMap((doc) =>
      [...readFileSync(join(root, doc), 'utf8').matchAll(named)].flatMap(([path]) => {
        const under = path.replace(/^(\.\.\/)+/, '');
        const found = under.includes('/') ? tracked.some((file) => file === under || file.endsWith(`/${under}`)) : testFiles.has(under);
        return found ? [] : [`${doc}: ${path}`];
      }),
    );
    expect(missing).toEqual([]);
  });
});
