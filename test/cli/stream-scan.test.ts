import fc from 'fast-check';
import { ReplyError } from '../../src/cli/resp';
import { StreamPageScanner, type CountedFields, type PageEnd } from '../../src/cli/stream-scan';

/** RESP2 bytes of an XRANGE reply, written independently of the scanner under test. */
function xrangeReply(entries: readonly (readonly [string, readonly string[]])[]): Buffer {
  const bulk = (s: string) => `$${Buffer.byteLength(s)}\r\n${s}\r\n`;
  return Buffer.from(`*${entries.length}\r\n${entries.map(([id, fields]) => `*2\r\n${bulk(id)}*${fields.length}\r\n${fields.map(bulk).join('')}`).join('')}`, 'utf8');
}

/** Feed `bytes` in chunks of the given sizes (cycled); the visits and how the page ended. */
function scan(bytes: Buffer, sizes: readonly number[]): { visits: [string, CountedFields][]; end: PageEnd | undefined } {
  const visits: [string, CountedFields][] = [];
  const scanner = new StreamPageScanner((id, fields) => visits.push([id, fields]));
  let end: PageEnd | undefined;
  for (let pos = 0, i = 0; pos < bytes.length; i++) {
    const size = sizes[i % sizes.length];
    const result = scanner.push(bytes.subarray(pos, pos + size));
    pos += size;
    if (result !== undefined) {
      expect(pos).toBeGreaterThanOrEqual(bytes.length); // it ends only with the last byte
      end = result;
    }
  }
  return { visits, end };
}

/**
 * What the scanner must hand out for one entry's field list: the counted fields, '' when absent,
 * the last value when a name repeats (as `parseEvent` reads it).
 */
function counted(fields: readonly string[]): CountedFields {
  const get = (name: string) => {
    let value: string | undefined;
    for (let i = 0; i + 1 < fields.length; i += 2) if (fields[i] === name) value = fields[i + 1];
    return value;
  };
  return { decision: get('decision') ?? '', scope: get('scope') ?? '', step: get('step') ?? '', jobType: get('jobType') ?? '', holder: get('holder') };
}

describe('StreamPageScanner (the report read path)', () => {
  // Field names that share a length and first letter with counted ones must not pass for them.
  const nameArb = fc.constantFrom('decision', 'scope', 'step', 'jobType', 'holder', 'runId', 'stage', 'stop', 'jobTyp3', 'holdup', 'd', 'ts', 'é日本');
  const valueArb = fc.oneof(fc.constantFrom('', 'dispatched', 'a\r\nb', '$3', '*2'), fc.string(), fc.string({ unit: 'grapheme' }));
  const entriesArb = fc.array(
    fc.tuple(
      fc.nat().map((n) => `${1_700_000_000_000 + n}-${n % 7}`),
      fc.array(fc.tuple(nameArb, valueArb), { maxLength: 8 }).map((pairs) => pairs.flat()),
    ),
    { maxLength: 30 },
  );

  it('hands out every entry with its counted fields, whatever the chunking', () => {
    fc.assert(
      fc.property(entriesArb, fc.array(fc.integer({ min: 1, max: 64 }), { minLength: 1, maxLength: 5 }), (entries, sizes) => {
        const bytes = xrangeReply(entries);
        const { visits, end } = scan(bytes, sizes);
        expect(visits).toEqual(entries.map(([id, fields]) => [id, counted(fields)]));
        expect(end).toEqual({ count: entries.length, lastId: entries.length > 0 ? entries[entries.length - 1][0] : '' });
      }),
      { numRuns: 300 },
    );
  });

  it('rejects an error reply with a ReplyError, and bytes past the reply with an error', () => {
    const scanner = new StreamPageScanner(() => undefined);
    expect(scanner.push(Buffer.from('-NOPERM no permissions'))).toBeUndefined(); // no CRLF yet
    expect(() => scanner.push(Buffer.from('\r\n'))).toThrow(ReplyError);
    expect(() => new StreamPageScanner(() => undefined).push(Buffer.from('*0\r\n+OK\r\n'))).toThrow(/unexpected bytes/);
  });
});
