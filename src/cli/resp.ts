/**
 * A small RESP2 reply reader for the one hot path ioredis is slow on: `XRANGE` pages of
 * thousands of entries, where its reply decoder costs about 3 s of CPU per 100,000 dispatch-log
 * entries. This reader turns bytes into strings and nested arrays and nothing else, and can stop
 * part-way through a large top-level array and resume when more bytes arrive.
 */

/** A decoded reply: bulk and simple strings as UTF-8 text, `null` for nil. */
export type Reply = string | number | null | Reply[] | ReplyError;

/** An error reply (`-ERR ...`). */
export class ReplyError extends Error {
  override readonly name = 'ReplyError';
}

/** Strings up to this many bytes go through the intern cache; its size in slots (a power of 2). */
const INTERN_MAX_BYTES = 24;
const INTERN_SLOTS = 4096;

/** Returned when the bytes so far end inside a value. */
export const INCOMPLETE: unique symbol = Symbol('incomplete');
export type Incomplete = typeof INCOMPLETE;

/** Bytes received so far, and where reading is. */
export interface Cursor {
  buf: Buffer;
  pos: number;
}

/** The decimal after a `$` or `*` at `at.pos`, moving past its CRLF; INCOMPLETE without one. */
export function readLength(at: Cursor): number | Incomplete {
  const buf = at.buf;
  let i = at.pos;
  if (i >= buf.length) return INCOMPLETE;
  const negative = buf[i] === 0x2d;
  if (negative) i++;
  let n = 0;
  for (; i < buf.length; i++) {
    const c = buf[i];
    if (c === 0x0d) {
      if (i + 1 >= buf.length) return INCOMPLETE;
      at.pos = i + 2;
      return negative ? -n : n;
    }
    n = n * 10 + (c - 0x30);
  }
  return INCOMPLETE;
}

/**
 * Feeds on socket chunks and hands out whole replies in order. A top-level array keeps the
 * elements already decoded when its bytes run out, so a reply of megabytes is read in one pass.
 */
export class ReplyReader implements Cursor {
  buf: Buffer = Buffer.alloc(0);
  pos = 0;
  /** A top-level array in progress: its length and the elements decoded so far. */
  private partial: { length: number; items: Reply[] } | undefined;
  private readonly cache: (string | undefined)[] = new Array<string | undefined>(INTERN_SLOTS);

  /** Add a chunk; return every reply it completes. */
  push(chunk: Buffer): Reply[] {
    this.buf = this.pos < this.buf.length ? Buffer.concat([this.buf.subarray(this.pos), chunk]) : chunk;
    this.pos = 0;
    const replies: Reply[] = [];
    for (;;) {
      const reply = this.next();
      if (reply === INCOMPLETE) return replies;
      replies.push(reply);
    }
  }

  private next(): Reply | Incomplete {
    if (this.partial === undefined) {
      if (this.pos >= this.buf.length) return INCOMPLETE;
      if (this.buf[this.pos] !== 0x2a /* '*' */) {
        const start = this.pos;
        const value = this.value();
        if (value === INCOMPLETE) this.pos = start;
        return value;
      }
      const start = this.pos++;
      const n = this.length();
      if (n === INCOMPLETE) {
        this.pos = start;
        return INCOMPLETE;
      }
      if (n < 0) return null;
      this.partial = { length: n, items: [] };
    }
    const { partial } = this;
    while (partial.items.length < partial.length) {
      const start = this.pos;
      const item = this.value();
      if (item === INCOMPLETE) {
        this.pos = start;
        return INCOMPLETE;
      }
      partial.items.push(item);
    }
    this.partial = undefined;
    return partial.items;
  }

  /** One whole value at `pos`, or INCOMPLETE (the caller rewinds). */
  private value(): Reply | Incomplete {
    const buf = this.buf;
    if (this.pos >= buf.length) return INCOMPLETE;
    const type = buf[this.pos++];
    if (type === 0x24 /* '$' bulk string */ || type === 0x2a /* '*' array */) {
      const n = this.length();
      if (n === INCOMPLETE) return INCOMPLETE;
      if (n < 0) return null;
      if (type === 0x24) {
        if (this.pos + n + 2 > buf.length) return INCOMPLETE;
        const text = n <= INTERN_MAX_BYTES ? this.interned(n) : utf8(buf, this.pos, this.pos + n);
        this.pos += n + 2;
        return text;
      }
      const items: Reply[] = new Array<Reply>(n);
      for (let i = 0; i < n; i++) {
        // Bulk strings, nearly every element of a stream reply, are read here without recursing.
        const item = buf[this.pos] === 0x24 ? this.bulk() : this.value();
        if (item === INCOMPLETE) return INCOMPLETE;
        items[i] = item;
      }
      return items;
    }
    const end = buf.indexOf(0x0d, this.pos);
    if (end < 0 || end + 1 >= buf.length) return INCOMPLETE;
    const line = buf.toString('utf8', this.pos, end);
    this.pos = end + 2;
    switch (type) {
      case 0x2b: // '+' simple string
        return line;
      case 0x2d: // '-' error
        return new ReplyError(line);
      case 0x3a: // ':' integer
        return Number(line);
      default:
        throw new Error(`unexpected RESP type byte 0x${type.toString(16)}`);
    }
  }

  /** The bulk string at `pos` (its `$` included), or INCOMPLETE. */
  private bulk(): string | null | Incomplete {
    this.pos++;
    const n = this.length();
    if (n === INCOMPLETE) return INCOMPLETE;
    if (n < 0) return null;
    if (this.pos + n + 2 > this.buf.length) return INCOMPLETE;
    const text = n <= INTERN_MAX_BYTES ? this.interned(n) : utf8(this.buf, this.pos, this.pos + n);
    this.pos += n + 2;
    return text;
  }

  /**
   * The `n`-byte string at `pos`, from a small direct-mapped cache when the same ASCII bytes were
   * seen before. Field names and decisions repeat in every entry; not allocating them again
   * halves the garbage of a 100,000-entry read.
   */
  private interned(n: number): string {
    const buf = this.buf;
    const start = this.pos;
    let hash = n;
    for (let i = start; i < start + n; i++) hash = (Math.imul(hash, 31) + buf[i]) | 0;
    const slot = hash & (INTERN_SLOTS - 1);
    const cached = this.cache[slot];
    if (cached !== undefined && cached.length === n) {
      let same = true;
      for (let k = 0; k < n; k++) {
        if (cached.charCodeAt(k) !== buf[start + k]) {
          same = false;
          break;
        }
      }
      if (same) return cached;
    }
    const text = utf8(buf, start, start + n);
    if (text.length === n) this.cache[slot] = text; // n bytes, n characters: ASCII, comparable byte by byte
    return text;
  }

  private length(): number | Incomplete {
    return readLength(this);
  }
}

/** Node's own UTF-8 decoder without `toString`'s argument checks: this runs once per field. */
const utf8: (buf: Buffer, start: number, end: number) => string =
  typeof (Buffer.prototype as { utf8Slice?: unknown }).utf8Slice === 'function'
    ? (buf, start, end) => (buf as unknown as { utf8Slice(s: number, e: number): string }).utf8Slice(start, end)
    : (buf, start, end) => buf.toString('utf8', start, end);

/** A command as RESP2 bytes. */
export function encodeCommand(args: readonly (string | number)[]): Buffer {
  const parts: Buffer[] = [Buffer.from(`*${args.length}\r\n`)];
  for (const arg of args) {
    const bytes = Buffer.from(String(arg), 'utf8');
    parts.push(Buffer.from(`$${bytes.length}\r\n`), bytes, Buffer.from('\r\n'));
  }
  return Buffer.concat(parts);
}
