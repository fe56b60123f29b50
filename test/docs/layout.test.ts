import { readFileSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { dirname, join, relative, resolve } from 'node:path';

// Dependencies run one way (CONTRIBUTING.md, "Layout"): test code may import src/ and
// sample-workflows/, but nothing that ships or runs outside the suites (src/, the samples'
// non-test code, bench/, model/, scripts/) imports test/. The suites import the samples to run
// them, never for a helper: theirs are in test/support/.
const root = join(__dirname, '..', '..');
const tracked = execFileSync('git', ['ls-files', '*.ts', '*.js'], { cwd: root, encoding: 'utf8' }).split('\n').filter(Boolean);
const outsideTests = tracked.filter((file) => !file.startsWith('test/') && !file.startsWith('python/') && !file.endsWith('.test.ts'));
const suites = tracked.filter((file) => file.startsWith('test/'));

function importsOf(file: string): string[] {
  const text = readFileSync(join(root, file), 'utf8');
  return [...text.matchAll(/(?:from|import|require)\s*\(?\s*['"](\.{1,2}\/[^'"]+)['"]/g)].map(([, spec]) => spec);
}

describe('layout', () => {
  it('finds the files it checks', () => {
    expect(outsideTests).toContain('src/index.ts');
    expect(outsideTests).toContain('sample-workflows/demo.ts');
  });

  it('nothing outside the test suites imports test/', () => {
    const offenders = outsideTests.flatMap((file) =>
      importsOf(file)
        .map((spec) => relative(root, resolve(root, dirname(file), spec)))
        .filter((target) => target === 'test' || target.startsWith('test/'))
        .map((target) => `${file} imports ${target}`),
    );
    expect(offenders).toEqual([]);
  });

  it("the suites take no helper from the samples' shared/ folder", () => {
    const offenders = suites.flatMap((file) =>
      importsOf(file)
        .map((spec) => relative(root, resolve(root, dirname(file), spec)))
        .filter((target) => target.startsWith('sample-workflows/shared/'))
        .map((target) => `${file} imports ${target}`),
    );
    expect(offenders).toEqual([]);
  });
});
