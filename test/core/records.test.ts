import fc from 'fast-check';
import { artifactArgument, formatArtifact, formatWaiter, parseArtifact, parseWaiter } from '../../src/core/records';

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

describe('waiter entries', () => {
  const hashes = fc.oneof(
    fc.constant(''),
    fc.base64String({ maxLength: 44 }).map((s) => s.replace(/[+/=]/g, '_')),
  );

  it('give back the args hash and the task token they were made of', () => {
    fc.assert(
      fc.property(hashes, fc.uint8Array({ maxLength: 300 }), (hash, token) => {
        const parsed = parseWaiter(formatWaiter(hash, token));
        expect([parsed.argsHash, Buffer.from(parsed.token)]).toEqual([hash, Buffer.from(token)]);
      }),
    );
  });

  it('read a bare task token, as 0.2.3 parked it, as a token with no args hash', () => {
    // A task token is a protobuf message: it never starts with 'w', whose wire type (7) does not exist.
    fc.assert(
      fc.property(
        fc.uint8Array({ maxLength: 300 }).filter((t) => t[0] !== 0x77),
        (token) => expect(parseWaiter(Buffer.from(token))).toEqual({ argsHash: '', token: Buffer.from(token) }),
      ),
    );
    const tooLong = Buffer.from(`w:${'h'.repeat(65)}:token`);
    expect(parseWaiter(tooLong)).toEqual({ argsHash: '', token: tooLong });
  });
});
