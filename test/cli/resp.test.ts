import { ReplyError, ReplyReader, encodeCommand, type Reply } from '../../src/cli/resp';

/** RESP2 bytes of a reply, written independently of the reader under test. */
function encode(reply: Reply): string {
  if (reply === null) return '$-1\r\n';
  if (typeof reply === 'number') return `:${reply}\r\n`;
  if (reply instanceof ReplyError) return `-${reply.message}\r\n`;
  if (Array.isArray(reply)) return `*${reply.length}\r\n${reply.map(encode).join('')}`;
  return `$${Buffer.byteLength(reply)}\r\n${reply}\r\n`;
}

/** Feed `bytes` in chunks of the given sizes (cycled) and collect every reply. */
function feed(bytes: Buffer, sizes: readonly number[]): Reply[] {
  const reader = new ReplyReader();
  const out: Reply[] = [];
  for (let pos = 0, i = 0; pos < bytes.length; i++) {
    const size = sizes[i % sizes.length];
    out.push(...reader.push(bytes.subarray(pos, pos + size)));
    pos += size;
  }
  return out;
}

describe('ReplyReader (the report read path)', () => {
  const entry = (n: number): Reply => [`${1700000000000 + n}-${n % 3}`, ['decision', n % 2 ? 'dispatched' : 'fast-forwarded', 'scope', `séssion-${n}`, 'note', n % 5 ? '' : 'a\r\nb']];
  const xrange: Reply = Array.from({ length: 300 }, (_, n) => entry(n));
  const replies: Reply[] = ['OK', 42, null, new ReplyError('NOPERM no permissions'), xrange, [], 'PONG', ['nested', ['deeper', [null, 7]]]];
  const bytes = Buffer.from(replies.map(encode).join(''), 'utf8');

  it.each([[[bytes.length]], [[1]], [[2, 3, 5, 7]], [[64]], [[1000, 1]]])('decodes the same replies whatever the chunking (%j)', (sizes) => {
    const out = feed(bytes, sizes);
    expect(out.map((r) => (r instanceof ReplyError ? `error: ${r.message}` : r))).toEqual(
      replies.map((r) => (r instanceof ReplyError ? `error: ${r.message}` : r)),
    );
  });

  it('hands out a repeated short string from its cache without mixing up strings that share a slot', () => {
    // Many distinct short strings force slot collisions in the 4096-slot cache.
    const many: Reply = Array.from({ length: 20_000 }, (_, n) => (n % 2 ? 'decision' : `v${n}`));
    const [out] = feed(Buffer.from(encode(many)), [4096]);
    expect(out).toEqual(many);
  });

  it('encodes commands as RESP arrays of bulk strings, in UTF-8', () => {
    expect(encodeCommand(['XRANGE', 'k:{é}', 5]).toString('utf8')).toBe('*3\r\n$6\r\nXRANGE\r\n$6\r\nk:{é}\r\n$1\r\n5\r\n');
  });
});
