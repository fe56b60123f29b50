import fc from 'fast-check';
import { FireOnceConfigError, FireOnceInvalidId } from '../../src';
import { FireOnceKeys, MAX_ID_BYTES, decodeId, encodeId } from '../../src/core';

describe('encodeId', () => {
  it('keeps unreserved characters and percent-encodes everything else', () => {
    expect(encodeId('scope', 'session-42_a.b~c')).toBe('session-42_a.b~c');
    expect(encodeId('scope', 'a:b*c?[d]{e}%')).toBe('a%3Ab%2Ac%3F%5Bd%5D%7Be%7D%25');
    expect(encodeId('step', 'line\nnul\0')).toBe('line%0Anul%00');
    expect(encodeId('jobType', 'résumé')).toBe('r%C3%A9sum%C3%A9');
  });

  it.each([
    ['empty', ''],
    ['whitespace only', ' \t\n '],
    ['too long', 'x'.repeat(MAX_ID_BYTES + 1)],
    ['10 kB', 'y'.repeat(10_000)],
    ['a lone surrogate', 'a\uD800b'],
  ])('refuses a %s ID with FireOnceInvalidId naming the kind', (_name, id) => {
    expect(() => encodeId('scope', id)).toThrow(FireOnceInvalidId);
    expect(() => encodeId('scope', id)).toThrow(/^scope /);
  });

  it('refuses a non-string', () => {
    expect(() => encodeId('step', 42 as unknown as string)).toThrow('step must be a string (got number)');
  });

  it('is injective and decodable, and never emits a glob, colon, brace, space or control character', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'grapheme', minLength: 1, maxLength: 40 }), fc.string({ unit: 'grapheme', minLength: 1, maxLength: 40 }), (a, b) => {
        fc.pre(a.trim() !== '' && b.trim() !== '');
        const ea = encodeId('scope', a);
        const eb = encodeId('scope', b);
        expect(ea === eb).toBe(a === b);
        expect(decodeId(ea)).toBe(a);
        expect(ea).toMatch(/^[A-Za-z0-9._~%-]+$/);
      }),
      { numRuns: 2_000 },
    );
  });
});

describe('FireOnceKeys', () => {
  const keys = new FireOnceKeys('fire-once');

  it('lays out protocol v3: the namespace and scope in one hash tag, so a scope shares a cluster slot', () => {
    expect(keys.lock('s1', 'dispatch')).toBe('fire-once:v3:{default/s1}:l:dispatch');
    expect(keys.artifact('s1', 'summary')).toBe('fire-once:v3:{default/s1}:a:summary');
    expect(keys.waiters('s1', 'dispatch')).toBe('fire-once:v3:{default/s1}:w:dispatch');
    expect(keys.external('s1', 'summary')).toBe('fire-once:v3:{default/s1}:x:summary');
    expect(keys.wakeChannel('s1')).toBe('fire-once:v3:{default/s1}:wake');
    expect(keys.log()).toBe('fire-once:v3:default:log');
    expect(keys.invalidations()).toBe('fire-once:v3:default:invalidations');
    expect(keys.protocolMarker()).toBe('fire-once:protocol');
  });

  it('files each namespace apart: the same scope in two namespaces shares no key', () => {
    const tenant = keys.forNamespace('tenant-b');
    expect(tenant.lock('s1', 'dispatch')).toBe('fire-once:v3:{tenant-b/s1}:l:dispatch');
    expect(tenant.log()).toBe('fire-once:v3:tenant-b:log');
    for (const kind of ['artifact', 'lock', 'waiters', 'external'] as const) {
      expect(tenant.ofKind(kind, 's1', 'x')).not.toBe(keys.ofKind(kind, 's1', 'x'));
    }
    // A namespace with a slash or brace cannot reach into another's tag.
    expect(keys.forNamespace('a/b').scopeBase('c')).toBe('fire-once:v3:{a%2Fb/c}');
    expect(keys.forNamespace('a').scopeBase('b/c')).toBe('fire-once:v3:{a/b%2Fc}');
  });

  it('cannot be forged across scopes, steps or namespaces by IDs that contain the separators', () => {
    // Without encoding, scope "a}:l:x" + step "y" could collide with scope "a" + step "x}:…".
    const forged = keys.lock('a}:l:b', 'c');
    expect(forged).toBe('fire-once:v3:{default/a%7D%3Al%3Ab}:l:c');
    expect(forged).not.toBe(keys.lock('a', 'b}:l:c'));
    const id = fc.string({ minLength: 1 }).filter((v) => v.trim() !== '');
    fc.assert(
      fc.property(fc.tuple(id, id, id), fc.tuple(id, id, id), ([n1, s1, t1], [n2, s2, t2]) => {
        const a = keys.forNamespace(n1);
        const b = keys.forNamespace(n2);
        expect(a.lock(s1, t1) === b.lock(s2, t2)).toBe(n1 === n2 && s1 === s2 && t1 === t2);
        expect(a.lock(s1, t1)).not.toBe(b.artifact(s2, t2));
        expect(a.log() === b.lock(s2, t2)).toBe(false);
      }),
      { numRuns: 2_000 },
    );
  });

  it('keeps key prefixes apart, one nested in another included: no key, channel or SCAN pattern of one reaches the other', () => {
    // Prefixes may hold colons, so `a` and `a:v3:x` (or `a:v3`) are both valid; none of their keys
    // may meet, and the CLI's patterns (`<scope base>:*`, `<prefix>:v3:{<ns>/*`) end at a character
    // no prefix holds.
    const part = fc.constantFrom('a', 'v3', 'x', 'log', 'protocol', 'default', 'invalidations');
    const prefix = fc.array(part, { minLength: 1, maxLength: 4 }).map((parts) => parts.join(':'));
    const id = fc.constantFrom('default', 'v3', 'log', 's', 'a:b', 'x}:l:y', '{s}');
    fc.assert(
      fc.property(prefix, prefix, id, id, id, (p1, p2, ns, scope, step) => {
        fc.pre(p1 !== p2);
        const all = (keys: FireOnceKeys) => [
          ...(['artifact', 'lock', 'waiters', 'external'] as const).map((kind) => keys.ofKind(kind, scope, step)),
          keys.wakeChannel(scope),
          keys.log(),
          keys.invalidations(),
          keys.protocolMarker(),
        ];
        const [a, b] = [new FireOnceKeys(p1, ns), new FireOnceKeys(p2, ns)];
        const theirs = all(b);
        for (const key of all(a)) expect(theirs).not.toContain(key);
        for (const pattern of [`${a.scopeBase(scope)}:`, a.namespacePattern().slice(0, -1)]) {
          for (const key of theirs) expect(key.startsWith(pattern)).toBe(false);
        }
        for (const key of theirs) expect(a.parse(key)).toBeUndefined();
      }),
      { numRuns: 3_000 },
    );
  });

  // The guard checks its keyPrefix option; FireOnceKeys is public too (the CLI and tools build
  // keys with it). A brace would move every key's Cluster slot to the prefix's own hash tag, and a
  // glob would reach other prefixes' keys in a SCAN pattern.
  it.each([['a{b}'], ['fire-once*'], [''], ['has space'], ['x'.repeat(65)], [7]])('refuses the prefix %j, as the guard refuses its keyPrefix', (prefix) => {
    const message = `prefix must be 1-64 characters of [A-Za-z0-9._:-], starting with a letter or digit (got ${typeof prefix === 'string' ? JSON.stringify(prefix) : String(prefix)})`;
    expect(() => new FireOnceKeys(prefix as string)).toThrow(new FireOnceConfigError(message));
  });

  it('parses its own keys back, in any namespace, and nothing else', () => {
    const tenant = keys.forNamespace('tenant:b');
    expect(keys.parse(tenant.lock('chat:7*', 'send'))).toEqual({ namespace: 'tenant:b', scope: 'chat:7*', kind: 'lock', id: 'send' });
    expect(keys.parse(keys.artifact('s', 'job'))).toEqual({ namespace: 'default', scope: 's', kind: 'artifact', id: 'job' });
    expect(keys.parse(keys.wakeChannel('s'))).toEqual({ namespace: 'default', scope: 's', kind: 'wake' });
    // Keys of this layout's shape whose IDs encodeId never writes (a bare `%`, a lone byte, a bad escape).
    const foreign = ['fire-once:v3:{default/ab}:x:100%', 'fire-once:v3:{default/ab}:l:%E9', 'fire-once:v3:{%ZZ/ab}:a:job'];
    for (const other of [keys.log(), keys.protocolMarker(), 'fire-once:{s}:lock:job', 'other:v3:{default/s}:l:job', `${keys.lock('s', 'j')}:x`, ...foreign]) {
      expect(keys.parse(other)).toBeUndefined();
    }
  });

  it('reads back only the encoding encodeId writes: a needless, lower-case or missing escape is another key, never the same ID', () => {
    // Each decodes to the ID on its right, yet encodeId writes that ID otherwise: read as it, two
    // keys would name one (scope, step), and a foreign key would pass for the guard's own.
    const twins: [string, string][] = [
      ['fin%65', 'fine'],
      ['chat%3a7', 'chat:7'],
      ['chat:7', 'chat:7'],
      ['a b', 'a b'],
      ['%C3%a9', 'é'],
      ['é', 'é'],
    ];
    for (const [encoded, id] of twins) {
      expect(encodeId('scope', id)).not.toBe(encoded);
      expect(() => decodeId(encoded)).toThrow(FireOnceInvalidId);
      expect(keys.parse(`fire-once:v3:{default/${encoded}}:a:job`)).toBeUndefined();
      expect(keys.parse(`fire-once:v3:{default/s}:l:${encoded}`)).toBeUndefined();
      expect(keys.parse(`fire-once:v3:{${encoded}/s}:wake`)).toBeUndefined();
    }
    expect(keys.parse('fire-once:v3:{default/%20}:a:job')).toBeUndefined(); // an ID the guard refuses
    expect(decodeId('fine')).toBe('fine');
    expect(decodeId('chat%3A7')).toBe('chat:7');
  });
});
