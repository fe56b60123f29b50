import { isIP, connect as netConnect, type Socket } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import { ReplyError, ReplyReader, encodeCommand, type Reply } from './resp';
import { StreamPageScanner, type CountedFields, type PageEnd } from './stream-scan';

/**
 * A bare connection for reading the dispatch log fast (see `resp.ts`): one command at a time,
 * from the same URL the rest of the CLI hands to ioredis. It understands what that URL can say:
 * `rediss://` for TLS, `user:password@` for an ACL user (or `:password@` for the default one)
 * and `/db`. The caller has already connected through ioredis, so a bad URL or unreachable Redis
 * has been reported before this is opened.
 */
export class RawConnection {
  private readonly reader = new ReplyReader();
  /** Set while an `XRANGE` reply is read by `scanPage`: it takes the bytes instead of `reader`. */
  private scanner: { scan: StreamPageScanner; resolve: (end: PageEnd) => void } | undefined;
  private waiting: { resolve: (reply: Reply) => void; reject: (err: Error) => void } | undefined;
  private failure: Error | undefined;

  private constructor(
    private readonly socket: Socket,
    private readonly timeoutMs: number,
  ) {
    socket.on('data', (chunk: Buffer) => {
      if (this.scanner !== undefined) {
        this.feedScanner(this.scanner, chunk);
        return;
      }
      let replies: Reply[];
      try {
        replies = this.reader.push(chunk);
      } catch (err) {
        this.fail(err as Error);
        return;
      }
      for (const reply of replies) {
        const waiting = this.waiting;
        this.waiting = undefined;
        waiting?.resolve(reply);
      }
    });
    socket.on('error', (err) => this.fail(err));
    socket.on('close', () => this.fail(new Error('Connection is closed.')));
    socket.on('timeout', () => {
      this.fail(new Error('Command timed out'));
      socket.destroy();
    });
  }

  /** Connect, authenticate and select the database the URL names. */
  static async open(url: string, timeoutMs: number): Promise<RawConnection> {
    const u = new URL(url);
    const host = u.hostname.replace(/^\[|\]$/g, '') || '127.0.0.1';
    const port = Number(u.port || 6379);
    // SNI names a host, never an IP (RFC 6066; Node warns on stderr). A Cluster hands out its
    // nodes as IPs: the certificate is then checked against the IP.
    const servername = isIP(host) ? undefined : host;
    const socket = await new Promise<Socket>((resolve, reject) => {
      const s: Socket =
        u.protocol === 'rediss:' ? tlsConnect({ host, port, servername }, () => resolve(s)) : netConnect({ host, port }, () => resolve(s));
      s.once('error', reject);
      s.once('timeout', () => {
        s.destroy();
        reject(new Error(`connect to ${host}:${port} timed out after ${timeoutMs} ms`));
      });
      s.setTimeout(timeoutMs);
    });
    socket.removeAllListeners('error');
    socket.removeAllListeners('timeout');
    socket.setTimeout(0);
    const conn = new RawConnection(socket, timeoutMs);
    const user = decodeURIComponent(u.username);
    const password = decodeURIComponent(u.password);
    if (password) await conn.call(user ? ['AUTH', user, password] : ['AUTH', password]);
    const db = Number(u.pathname.replace(/^\//, '') || 0);
    if (db) await conn.call(['SELECT', db]);
    return conn;
  }

  /** Send one command and resolve its reply; an error reply rejects with a `ReplyError`. */
  async call(args: readonly (string | number)[]): Promise<Reply> {
    if (this.failure) throw this.failure;
    // The timeout runs only while a reply is awaited: a silence that long ends the connection.
    this.socket.setTimeout(this.timeoutMs);
    const reply = await new Promise<Reply>((resolve, reject) => {
      this.waiting = { resolve, reject };
      this.socket.write(encodeCommand(args));
    }).finally(() => this.socket.setTimeout(0));
    if (reply instanceof ReplyError) throw reply;
    return reply;
  }

  /**
   * Send one `XRANGE` and hand its entries to `visit` as they arrive (see `StreamPageScanner`);
   * resolves how many there were and the last one's ID. An error reply rejects with a `ReplyError`.
   */
  async scanPage(args: readonly (string | number)[], visit: (id: string, fields: CountedFields) => void): Promise<PageEnd> {
    if (this.failure) throw this.failure;
    this.socket.setTimeout(this.timeoutMs);
    return new Promise<PageEnd>((resolve, reject) => {
      this.waiting = { resolve: () => undefined, reject };
      this.scanner = { scan: new StreamPageScanner(visit), resolve };
      this.socket.write(encodeCommand(args));
    }).finally(() => {
      this.scanner = undefined;
      this.waiting = undefined;
      this.socket.setTimeout(0);
    });
  }

  private feedScanner(scanner: { scan: StreamPageScanner; resolve: (end: PageEnd) => void }, chunk: Buffer): void {
    let end: PageEnd | undefined;
    try {
      end = scanner.scan.push(chunk);
    } catch (err) {
      if (err instanceof ReplyError) {
        this.scanner = undefined;
        this.waiting?.reject(err);
      } else {
        this.fail(err as Error);
      }
      return;
    }
    if (end !== undefined) scanner.resolve(end);
  }

  close(): void {
    this.socket.destroy();
  }

  private fail(err: Error): void {
    this.failure ??= err;
    const waiting = this.waiting;
    this.waiting = undefined;
    waiting?.reject(err);
  }
}
