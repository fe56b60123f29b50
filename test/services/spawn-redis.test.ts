import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { freePort, spawnRedisServerOnFreePort, type SpawnedRedisServer } from '../../sample-workflows/services';
import { startSentinelGroup } from '../support/cluster/sentinel';
import { OwnRedis, OwnTemporal } from '../support/faults/services';
import { makeCertificate } from '../support/tls';

// A port found free can be taken before the server binds it. The spawner must then start the
// server again on another port, and must never hand out the address of whoever took the port.
describe('spawning a test server on a free port', () => {
  let squatter: Server;
  let takenPort: number;
  const connections = new Set<Socket>();
  beforeEach(async () => {
    squatter = createServer((socket) => {
      connections.add(socket);
      socket.on('close', () => connections.delete(socket));
      socket.end('-ERR not the redis-server you spawned\r\n');
    });
    await new Promise<void>((resolve) => squatter.listen(0, '127.0.0.1', resolve));
    takenPort = (squatter.address() as { port: number }).port;
  });
  /** A `pickPort` that hands out a taken port (the squatter's, or `held`) as its pick number `taken` (from 0), and free ports otherwise; `picked` lists them all. */
  const takenAt = (taken: number, held = takenPort) => {
    const picked: number[] = [];
    const pickPort = async () => {
      const port = picked.length === taken ? held : await freePort();
      picked.push(port);
      return port;
    };
    return { picked, pickPort };
  };
  /** Run `check` with a client of `server`, then close both. */
  const withClient = async (server: SpawnedRedisServer, check: (client: Redis) => Promise<void>) => {
    const client = new Redis(server.url, { lazyConnect: true, maxRetriesPerRequest: 0 });
    try {
      await client.connect();
      await check(client);
    } finally {
      client.disconnect();
      await server.stop();
    }
  };
  afterEach(async () => {
    // A replica that dialled the squatter as its master may leave its socket half-closed.
    for (const socket of connections) socket.destroy();
    await new Promise<void>((resolve) => squatter.close(() => resolve()));
  });

  it('starts again on a new port when its port was taken, and its URL reaches the server it spawned', async () => {
    const { picked, pickPort } = takenAt(0);
    const server = await spawnRedisServerOnFreePort([], { pickPort });
    await withClient(server, async (client) => {
      expect(picked).toHaveLength(2);
      expect(server.port).toBe(picked[1]);
      expect(await client.ping()).toBe('PONG');
      expect(server.output()).toContain('Ready to accept connections');
    });
  });

  it('in cluster mode, starts again on new ports when its cluster bus port was taken', async () => {
    const { picked, pickPort } = takenAt(1); // the first attempt's cluster bus port
    const server = await spawnRedisServerOnFreePort([], { clusterBus: true, pickPort });
    await withClient(server, async (client) => {
      expect(picked).toHaveLength(4);
      expect(server.port).toBe(picked[2]);
      expect(await client.config('GET', 'cluster-port')).toEqual(['cluster-port', String(picked[3])]);
      expect(await client.cluster('INFO')).toMatch(/cluster_state:/);
    });
  });

  it('with a TLS port beside the plain one, starts again on new ports when its TLS port was taken', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'fire-once-spawn-tls-'));
    try {
      const cert = makeCertificate(dir);
      const { picked, pickPort } = takenAt(1); // the first attempt's TLS port
      const args = ['--tls-cert-file', cert.certFile, '--tls-key-file', cert.keyFile, '--tls-ca-cert-file', cert.certFile, '--tls-auth-clients', 'no'];
      const server = await spawnRedisServerOnFreePort(args, { tlsPort: true, pickPort });
      expect(picked).toHaveLength(4);
      expect([server.port, server.tlsPort]).toEqual(picked.slice(2));
      const overTls = new Redis({
        port: server.tlsPort,
        host: '127.0.0.1',
        lazyConnect: true,
        maxRetriesPerRequest: 0,
        tls: { ca: readFileSync(cert.certFile) },
      });
      try {
        await overTls.connect();
        expect(await overTls.ping()).toBe('PONG');
      } finally {
        overTls.disconnect();
      }
      await withClient(server, async (client) => expect(await client.ping()).toBe('PONG'));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('starts a sentinel again on a new port when its port was taken, and its URL reaches that sentinel', async () => {
    const { picked, pickPort } = takenAt(0);
    const sentinel = await spawnRedisServerOnFreePort([], { sentinel: ['sentinel monitor orders 127.0.0.1 6379 1'], pickPort });
    await withClient(sentinel, async (client) => {
      expect(picked).toHaveLength(2);
      expect(await client.call('SENTINEL', 'GET-MASTER-ADDR-BY-NAME', 'orders')).toEqual(['127.0.0.1', '6379']);
    });
  });

  it('starts a sentinel group again on new ports when the port of its master was taken', async () => {
    const { picked, pickPort } = takenAt(0);
    const group = await startSentinelGroup('orders', { pickPort });
    try {
      // Two ports for the group whose master exited (its replica's too), five for the one that started.
      expect(picked).toHaveLength(7);
      expect(await group.masterPort()).toBe(picked[2]);
      expect(group.sentinels.map((s) => s.port)).toEqual(picked.slice(4));
    } finally {
      await group.stop();
    }
  });

  it("starts a fault suite's own redis-server again on a new port when another redis-server holds its first", async () => {
    const other = await spawnRedisServerOnFreePort([]);
    try {
      const { picked, pickPort } = takenAt(0, other.port);
      const own = await OwnRedis.start('none', pickPort);
      try {
        expect(picked).toHaveLength(2);
        expect(own.port).toBe(picked[1]);
      } finally {
        await own.stop();
      }
    } finally {
      await other.stop();
    }
  });

  it("starts a fault suite's own Temporal dev server again on a new port when another dev server holds its first", async () => {
    const other = Number(/:(\d+)$/.exec(process.env.TEMPORAL_ADDRESS ?? '')?.[1]); // the suite's shared dev server
    const { picked, pickPort } = takenAt(0, other);
    const own = await OwnTemporal.start(pickPort);
    try {
      expect(picked).toEqual([other, own.port]);
    } finally {
      await own.stop();
    }
  });

  it('gives up after three taken ports, with what redis-server said', async () => {
    await expect(spawnRedisServerOnFreePort([], { pickPort: async () => takenPort })).rejects.toThrow(/Address already in use/);
  });
});
