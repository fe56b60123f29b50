import fc from 'fast-check';
import { artifactArgument, formatArtifact, parseArtifact } from '../../src/core/records';

describe('artifactArgument', () => {
  it('puts the same bytes on the wire as formatArtifact, as a string only when the payload is UTF-8', () => {
    fc.assert(
      fc.property(
        fc.oneof(
          fc.constant(''),
          fc.base64String({ maxLength: 44 }).map((s) => s.replace(/[+/=]/g, '_')),
        ),
        fc.uint8Array({ maxLength: 300 }),
        (hash, bytes) => {
          const payload = Buffer.from(bytes);
          const argument = artifactArgument(hash, payload);
          const wire = typeof argument === 'string' ? Buffer.from(argument, 'utf8') : argument;
          expect(wire.equals(formatArtifact(hash, payload))).toBe(true);
          expect(parseArtifact(wire)?.payload.equals(payload)).toBe(true);
        },
      ),
    );
  });

  it('sends a text payload, a byte-order mark included, as a string, and invalid UTF-8 as a Buffer', () => {
    expect(artifactArgument('h1', Buffer.from('\uFEFFrésumé'))).toBe('3:h1:\uFEFFrésumé');
    expect(Buffer.isBuffer(artifactArgument('h1', Buffer.from([0x61, 0xc3])))).toBe(true);
    expect(Buffer.isBuffer(artifactArgument('', Buffer.from([0xed, 0xa0, 0x80])))).toBe(true); // an encoded lone surrogate
  });
});
