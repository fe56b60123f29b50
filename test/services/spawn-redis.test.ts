import { createServer, type Server } from 'node:net';
import { Redis } from 'ioredis';
import { freePort, spawnRedisServerOnFreePort } from '../../sample-workflows/services';

// A port found free can be taken before redis-server binds it. The spawner must then start the
// server again on another port, and must never hand out the URL of whoever took the port.
describe('spawning redis-server on a free port', () => {
  let squatter: Server;
  let takenPort: number;
  beforeEach(async () => {
    squatter = createServer((socket) => socket.end('-ERR not the redis-server you spawned\r\n'));
    await new Promise<void>((resolve) => squatter.listen(0, '127.0.0.1', resolve));
    takenPort = (squatter.address() as { port: number }).port;
  });
  afterEach(() => new Promise<void>((resolve) => squatter.close(() => resolve())));

  it('starts again on a new port when its port was taken, and its URL reaches the server it spawned', async () => {
    const picked: number[] = [];
    const server = await spawnRedisServerOnFreePort([], {
      pickPort: async () => {
        const port = picked.length === 0 ? takenPort : await freePort();
        picked.push(port);
        return port;
      },
    });
    const client = new Redis(server.url, { lazyConnect: true, maxRetriesPerRequest: 0 });
    try {
      expect(picked).toHaveLength(2);
      expect(server.port).toBe(picked[1]);
      await client.connect();
      expect(await client.ping()).toBe('PONG');
      expect(server.output()).toContain('Ready to accept connections');
    } finally {
      client.disconnect();
      await server.stop();
    }
  });

  it('gives up after three taken ports, with what redis-server said', async () => {
    await expect(spawnRedisServerOnFreePort([], { pickPort: async () => takenPort })).rejects.toThrow(/Address already in use/);
  });
});
