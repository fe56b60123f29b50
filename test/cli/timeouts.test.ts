import { createServer, type Server, type Socket } from 'node:net';
import { join } from 'node:path';
import { connect } from '../../src/cli/connect';
import { startScript } from '../support/scripts';

// A host that accepts the connection and never answers (a dead backend behind a load balancer, a
// port that is not Redis's): every command must give up after --timeout and exit 3 then, not
// some seconds later. Spawns CLI processes; slow on a loaded 2-core machine.
jest.setTimeout(120_000);

describe('fire-once against a host that accepts and never answers', () => {
  let server: Server;
  let port: number;
  const sockets: Socket[] = [];

  beforeAll(async () => {
    server = createServer((socket) => sockets.push(socket)); // reads nothing, writes nothing, never closes
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as { port: number }).port;
  });
  afterAll(async () => {
    for (const socket of sockets) socket.destroy();
    await new Promise((resolve) => server.close(resolve));
  });

  it('gives up connecting after the timeout, not seconds after it', async () => {
    const started = Date.now();
    await expect(connect({ url: `redis://127.0.0.1:${port}`, timeoutMs: 1_000 })).rejects.toThrow(/cannot use Redis at redis:\/\/127\.0\.0\.1:\d+/);
    expect(Date.now() - started).toBeLessThan(1_900);
  });

  it.each<[string[]]>([[['report']], [['inspect', 's']], [['release', 's', '--step', 'x', '--force']], [['doctor']]])(
    'exits 3 at once after saying why, in one plain message: fire-once %j',
    async (args) => {
      const cli = startScript(join('src', 'cli', 'main.ts'), [...args, '--redis', `redis://127.0.0.1:${port}`, '--timeout', '1s'], { REDIS_URL: undefined });
      let saidAt: number | undefined;
      cli.child.stderr?.once('data', () => (saidAt = Date.now()));
      const code = await new Promise<number | null>((resolve) => cli.child.once('close', resolve));
      const exitedAt = Date.now();
      expect(cli.stderr()).toBe(`fire-once: cannot use Redis at redis://127.0.0.1:${port}: Command timed out\n`);
      expect(code).toBe(3);
      expect(exitedAt - saidAt!).toBeLessThan(1_000); // nothing left holding the process open
    },
  );
});
