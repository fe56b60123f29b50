import fc from 'fast-check';
import { MAX_ID_BYTES, idProblem } from '../../src/common/ids';

// idProblem counts UTF-8 bytes and finds lone surrogates by hand, because the workflow sandbox
// gets no Buffer. Here it is checked against Node's own Buffer.byteLength and isWellFormed on
// random strings of arbitrary UTF-16 code units, lone surrogates included.
describe('idProblem, the one ID check of both sides', () => {
  const codeUnits = fc.array(fc.integer({ min: 0, max: 0xffff }), { maxLength: 300 }).map((units) => String.fromCharCode(...units));
  const nearTheLimit = fc.array(fc.constantFrom('a', 'é', '€', '🔥', '\uD800', '\uDC00'), { minLength: 120, maxLength: 520 }).map((parts) => parts.join(''));

  it('agrees with Buffer.byteLength and String.prototype.isWellFormed on any string', () => {
    fc.assert(
      fc.property(fc.oneof(codeUnits, nearTheLimit, fc.string({ unit: 'binary', maxLength: 200 })), (id) => {
        const problem = idProblem('scope', id);
        if (id.trim().length === 0) expect(problem).toMatch(/^scope must not be empty or whitespace only/);
        else if (!id.isWellFormed()) expect(problem).toBe('scope must be well-formed Unicode (it contains a lone surrogate)');
        else if (Buffer.byteLength(id) > MAX_ID_BYTES) expect(problem).toBe(`scope must be at most 512 bytes of UTF-8 (got ${Buffer.byteLength(id)})`);
        else expect(problem).toBeUndefined();
      }),
      { numRuns: 2_000 },
    );
  });

  it('names the kind of ID it was given', () => {
    expect(idProblem('step', 7)).toBe('step must be a string (got number)');
    expect(idProblem('jobType', '')).toBe('jobType must not be empty or whitespace only (got "")');
  });
});
