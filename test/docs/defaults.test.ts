import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { FIRE_ONCE_DEFAULTS, FireOnceGuard, FireOncePlugin } from '../../src';
import { GUARD_DEFAULTS } from '../../src/core';

// README's Options table is where a new user reads the defaults, and it says they are exported,
// frozen, as FIRE_ONCE_DEFAULTS: each default it states is that object's value, and that object
// given back as options is the defaults. python/tests/test_docs_defaults.py holds the Python
// package to the same table.
const root = join(__dirname, '..', '..');
const readme = readFileSync(join(root, 'README.md'), 'utf8');

/** The plugin's options table: each option's name and the first code span of its default cell. */
function documentedDefaults(): Map<string, string | undefined> {
  const section = /\n## Options\n([\s\S]*?)\nPer activity/.exec(readme)?.[1] ?? '';
  const rows = [...section.matchAll(/^\| `(\w+)` \| ([^|]*) \|/gm)];
  return new Map(rows.map(([, name, cell]) => [name, /`([^`]*)`/.exec(cell)?.[1]]));
}

/** A default cell's code span as a value: a number, a quoted string, a boolean. */
function literal(code: string): unknown {
  if (/^\d+$/.test(code)) return Number(code);
  if (/^'[^']*'$/.test(code)) return code.slice(1, -1);
  if (code === 'true' || code === 'false') return code === 'true';
  throw new Error(`not a literal: ${code}`);
}

describe("README's option defaults", () => {
  const documented = documentedDefaults();

  it('list every option of FIRE_ONCE_DEFAULTS, and no other but redis', () => {
    expect(documented.size).toBeGreaterThan(15);
    expect([...documented.keys()].filter((name) => name !== 'redis').sort()).toEqual(Object.keys(FIRE_ONCE_DEFAULTS).sort());
  });

  it('are the values of FIRE_ONCE_DEFAULTS, as a caller would give them', () => {
    const stated = Object.fromEntries(
      [...documented].filter(([name]) => name !== 'redis').map(([name, code]) => [name, code === undefined ? undefined : literal(code)]),
    );
    expect({ ...FIRE_ONCE_DEFAULTS }).toEqual(stated);
  });

  it('given back as options, FIRE_ONCE_DEFAULTS and GUARD_DEFAULTS resolve as no options do, with any store timeout', () => {
    const redis = new Redis({ lazyConnect: true });
    try {
      for (const storeTimeoutMs of [150, 200, 5_000]) {
        const plain = new FireOncePlugin({ redis, storeTimeoutMs }).guard.options;
        expect(new FireOncePlugin({ redis, ...FIRE_ONCE_DEFAULTS, storeTimeoutMs }).guard.options).toEqual(plain);
        expect(new FireOnceGuard({ redis, ...GUARD_DEFAULTS, storeTimeoutMs }).options).toEqual({ ...plain, namespace: 'default' });
      }
    } finally {
      redis.disconnect();
    }
  });

  it('are frozen through and through: no caller can change the defaults of the guards built after it', () => {
    for (const defaults of [FIRE_ONCE_DEFAULTS, GUARD_DEFAULTS] as Record<string, unknown>[]) {
      for (const value of [defaults, ...Object.values(defaults)]) {
        if (value !== null && typeof value === 'object') expect(Object.isFrozen(value)).toBe(true);
      }
    }
  });
});
