import { INCOMPLETE, ReplyError, readLength, type Cursor } from './resp';

/** The fields of a dispatch-log entry that `fire-once report` counts by. */
export interface CountedFields {
  readonly decision: string;
  readonly scope: string;
  readonly step: string;
  readonly jobType: string;
  readonly holder: string | undefined;
}

/** How one `XRANGE` reply ended: entries in it, and the last one's ID (`''` if none). */
export interface PageEnd {
  readonly count: number;
  readonly lastId: string;
}

const COUNTED = ['decision', 'scope', 'step', 'jobType', 'holder'] as const;
type Counted = (typeof COUNTED)[number];
/** The counted field names by byte length: no two of them are the same length. */
const BY_LENGTH: readonly (readonly [Counted, Buffer] | undefined)[] = (() => {
  const table: (readonly [Counted, Buffer] | undefined)[] = [];
  for (const name of COUNTED) {
    if (table[name.length] !== undefined) throw new Error(`counted field names must differ in length: ${name}`);
    table[name.length] = [name, Buffer.from(name)];
  }
  return table;
})();

/**
 * Reads one `XRANGE` reply (RESP2) straight from socket chunks and hands each entry's ID and
 * counted fields to `visit`, without building the reply: no array per entry, and no string for
 * a field name or for a value nobody counts. The report's read path; `ReplyReader` builds whole
 * replies and costs about three times as much CPU over 100,000 entries (bench/RESULTS.md). An
 * entry cut by a chunk boundary is read again from its start when the next chunk arrives.
 */
export class StreamPageScanner implements Cursor {
  buf: Buffer = Buffer.alloc(0);
  pos = 0;
  /** Entries still to read; -1 before the reply's header. */
  private remaining = -1;
  private count = 0;
  private lastId = '';

  constructor(private readonly visit: (id: string, fields: CountedFields) => void) {}

  /**
   * Add a chunk. Resolves how the page ended once its last entry is read, `undefined` while more
   * bytes are needed; throws the `ReplyError` of an error reply. Bytes past the reply are refused:
   * the connection sends one command at a time.
   */
  push(chunk: Buffer): PageEnd | undefined {
    this.buf = this.pos < this.buf.length ? Buffer.concat([this.buf.subarray(this.pos), chunk]) : chunk;
    this.pos = 0;
    if (this.remaining < 0) {
      const header = this.header();
      if (header === INCOMPLETE) {
        this.pos = 0;
        return undefined;
      }
      this.remaining = header;
    }
    while (this.remaining > 0) {
      const start = this.pos;
      if (this.entry() === INCOMPLETE) {
        this.pos = start;
        return undefined;
      }
      this.remaining--;
      this.count++;
    }
    if (this.pos !== this.buf.length) throw new Error(`${this.buf.length - this.pos} unexpected bytes after an XRANGE reply`);
    return { count: this.count, lastId: this.lastId };
  }

  /** `*<n>` (n entries, `*-1` for none) or an error reply. */
  private header(): number | typeof INCOMPLETE {
    const buf = this.buf;
    if (buf.length === 0) return INCOMPLETE;
    if (buf[0] === 0x2d /* '-' */) {
      const end = buf.indexOf('\r\n', 1);
      if (end < 0) return INCOMPLETE;
      throw new ReplyError(buf.toString('utf8', 1, end));
    }
    this.expect(0x2a /* '*' */);
    const n = this.length();
    return n === INCOMPLETE ? INCOMPLETE : Math.max(n, 0);
  }

  /** One entry, `*2 $id *2k (name value)...`, visited once whole. */
  private entry(): void | typeof INCOMPLETE {
    this.expect(0x2a);
    const pair = this.length();
    if (pair === INCOMPLETE) return INCOMPLETE;
    if (pair !== 2) throw new Error(`malformed XRANGE reply: an entry of ${pair} elements`);
    const id = this.bulk(true);
    if (id === INCOMPLETE) return INCOMPLETE;
    this.expect(0x2a);
    const n = this.length();
    if (n === INCOMPLETE) return INCOMPLETE;
    const fields: Record<Counted, string | undefined> = { decision: undefined, scope: undefined, step: undefined, jobType: undefined, holder: undefined };
    for (let i = 0; i + 1 < n; i += 2) {
      const name = this.name();
      if (name === INCOMPLETE) return INCOMPLETE;
      const value = this.bulk(name !== undefined);
      if (value === INCOMPLETE) return INCOMPLETE;
      if (name !== undefined) fields[name] = value ?? '';
    }
    if (n % 2 === 1 && this.bulk(false) === INCOMPLETE) return INCOMPLETE;
    this.lastId = id ?? '';
    this.visit(id ?? '', {
      decision: fields.decision ?? '',
      scope: fields.scope ?? '',
      step: fields.step ?? '',
      jobType: fields.jobType ?? '',
      holder: fields.holder,
    });
  }

  /**
   * A field name: which counted field it is, `undefined` for any other. Picked by length and
   * first byte, then confirmed byte by byte, so no string is made for it.
   */
  private name(): Counted | undefined | typeof INCOMPLETE {
    this.expect(0x24 /* '$' */);
    const n = this.length();
    if (n === INCOMPLETE || this.pos + n + 2 > this.buf.length) return INCOMPLETE;
    const start = this.pos;
    this.pos += n + 2;
    const candidate = BY_LENGTH[n];
    if (candidate === undefined || this.buf[start] !== candidate[1][0]) return undefined;
    const bytes = candidate[1];
    for (let i = 1; i < n; i++) if (this.buf[start + i] !== bytes[i]) return undefined;
    return candidate[0];
  }

  /** A bulk string, decoded as UTF-8 if `decode`, else skipped (`null`); `null` for nil too. */
  private bulk(decode: boolean): string | null | typeof INCOMPLETE {
    this.expect(0x24);
    const n = this.length();
    if (n === INCOMPLETE) return INCOMPLETE;
    if (n < 0) return null;
    if (this.pos + n + 2 > this.buf.length) return INCOMPLETE;
    const text = decode ? this.buf.toString('utf8', this.pos, this.pos + n) : null;
    this.pos += n + 2;
    return text;
  }

  private length(): number | typeof INCOMPLETE {
    return readLength(this);
  }

  /** Move past the type byte `type`; the end of the bytes so far is left to `length` to report. */
  private expect(type: number): void {
    if (this.pos >= this.buf.length) return;
    if (this.buf[this.pos] !== type) {
      throw new Error(`unexpected RESP type byte 0x${this.buf[this.pos].toString(16)} in an XRANGE reply (expected 0x${type.toString(16)})`);
    }
    this.pos++;
  }
}
