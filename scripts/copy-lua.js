// Copies the Lua scripts next to the compiled JavaScript that reads them at run time.
const fs = require('node:fs');
const path = require('node:path');

const from = path.join(__dirname, '..', 'src', 'core', 'scripts');
const to = path.join(__dirname, '..', 'dist', 'core', 'scripts');
fs.mkdirSync(to, { recursive: true });
for (const file of fs.readdirSync(from).filter((f) => f.endsWith('.lua'))) {
  fs.copyFileSync(path.join(from, file), path.join(to, file));
}
