import { readFileSync } from 'node:fs';
import { join } from 'node:path';

// The README is what a new user reads first: its Status line must name the release they install.
const root = join(__dirname, '..', '..');
const readme = readFileSync(join(root, 'README.md'), 'utf8');
const { version } = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { version: string };

describe('README', () => {
  it("names the package's release in its Status section", () => {
    const status = /^## Status\n\n(.*)$/m.exec(readme)?.[1];
    expect(status).toBe(`Version ${version.split('.').slice(0, 2).join('.')}. Known limits:`);
  });
});
