import { createServer, connect, type AddressInfo, type Socket } from 'node:net';

/** A TCP proxy to Redis whose replies come late: the link python/tests/slow_link.py makes. */
export interface SlowLink {
  /** A `redis://` URL through the proxy. */
  readonly url: string;
  /** How many chunks of replies it holds back now: 0 once every reply Redis gave has reached its client. */
  owed(): number;
  /** Cut every connection through it: nothing sent through it lands afterwards. */
  close(): Promise<void>;
}

/**
 * Forward each command at once and hand each reply back `replyDelayMs` late, in order (timers of
 * one duration fire in the order they were set). With `from`, a connection's replies are late
 * only once its client has sent a command containing that text: the link turns slow then.
 */
export async function slowLink(redisUrl: string, replyDelayMs: number, from?: string): Promise<SlowLink> {
  const upstream = new URL(redisUrl);
  const sockets = new Set<Socket>();
  let owed = 0;
  const track = (socket: Socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => socket.destroy());
  };
  const server = createServer((client) => {
    const redis = connect(Number(upstream.port), upstream.hostname);
    track(client);
    track(redis);
    let slow = from === undefined;
    client.on('data', (chunk: Buffer) => {
      slow ||= chunk.includes(from!);
      redis.write(chunk);
    });
    client.on('end', () => redis.end());
    redis.on('data', (chunk: Buffer) => {
      if (!slow) return void client.write(chunk);
      owed++;
      setTimeout(() => {
        owed--;
        if (client.writable) client.write(chunk);
      }, replyDelayMs);
    });
    redis.on('close', () => (slow ? setTimeout(() => client.destroy(), replyDelayMs).unref() : client.destroy())); // after the replies it holds
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `redis://127.0.0.1:${port}`,
    owed: () => owed,
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
