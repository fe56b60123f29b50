// Copies the Lua scripts next to the compiled JavaScript that reads them at run time: the guard's
// (src/core/scripts) and the CLI's (src/cli/scripts). Usage: node scripts/copy-lua.js [outDir],
// where outDir is the compiled tree (default: dist).
const fs = require('node:fs');
const path = require('node:path');

const outDir = process.argv[2] ?? path.join(__dirname, '..', 'dist');
for (const dir of [
  ['core', 'scripts'],
  ['cli', 'scripts'],
]) {
  const from = path.join(__dirname, '..', 'src', ...dir);
  const to = path.join(outDir, ...dir);
  fs.mkdirSync(to, { recursive: true });
  for (const file of fs.readdirSync(from).filter((f) => f.endsWith('.lua'))) {
    fs.copyFileSync(path.join(from, file), path.join(to, file));
  }
}
