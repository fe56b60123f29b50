import fc from 'fast-check';
import { FireOnceInvalidId, FireOnceKeys, MAX_ID_BYTES, decodeId, encodeId } from '../../src';

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

  it('hash-tags the scope so one scope shares a cluster slot', () => {
    expect(keys.lock('s1', 'dispatch')).toBe('fire-once:{s1}:lock:dispatch');
    expect(keys.artifact('s1', 'summary')).toBe('fire-once:{s1}:artifact:summary');
  });

  it('cannot be forged across scopes by IDs that contain the separators', () => {
    // Without encoding, scope "a}:lock:x" + step "y" could collide with scope "a" + step "x}:…".
    const forged = keys.lock('a}:lock:b', 'c');
    expect(forged).toBe('fire-once:{a%7D%3Alock%3Ab}:lock:c');
    expect(forged).not.toBe(keys.lock('a', 'b}:lock:c'));
    fc.assert(
      fc.property(fc.tuple(fc.string({ minLength: 1 }), fc.string({ minLength: 1 })), fc.tuple(fc.string({ minLength: 1 }), fc.string({ minLength: 1 })), ([s1, t1], [s2, t2]) => {
        fc.pre([s1, t1, s2, t2].every((v) => v.trim() !== ''));
        expect(keys.lock(s1, t1) === keys.lock(s2, t2)).toBe(s1 === s2 && t1 === t2);
        expect(keys.lock(s1, t1)).not.toBe(keys.artifact(s2, t2));
      }),
      { numRuns: 2_000 },
    );
  });
});

describe('FireOnceKeys.external', () => {
  it('puts external artifacts in the scope slot, apart from the guard-written artifact', () => {
    const keys = new FireOnceKeys('p');
    expect(keys.external('s', 'report')).toBe('p:{s}:external:report');
    expect(keys.external('s', 'report')).not.toBe(keys.artifact('s', 'report'));
  });
});
