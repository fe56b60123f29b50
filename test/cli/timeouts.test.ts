import { AsyncLocalStorage, createHook } from 'node:async_hooks';
import { createServer, type Server, type Socket } from 'node:net';
import { connect } from '../../src/cli/connect';
import { main } from '../../src/cli/main';

// A host that accepts the connection and never answers (a dead backend behind a load balancer, a
// port that is not Redis's): every command must give up after --timeout and leave nothing behind
// that would hold the process open. Checked by what is left, not by the clock: ioredis' 2 s
// disconnectTimeout, the defect, is a pending timer once the command has returned.
jest.setTimeout(120_000);

/**
 * Run `body` and resolve the timers it started that are still pending once it has settled. Only
 * timers started in `body`'s own async context count: one that an earlier test file's client
 * starts meanwhile, in the same jest worker, is not this body's.
 */
async function timersLeftBy<T>(body: () => Promise<T>): Promise<{ result: PromiseSettledResult<T>; left: number }> {
  const started = new Set<{ _destroyed?: boolean; _idleTimeout?: number; hasRef(): boolean }>();
  const ours = new AsyncLocalStorage<true>();
  const hook = createHook({
    init: (_id, type, _trigger, resource) => void (type === 'Timeout' && ours.getStore() === true && started.add(resource as never)),
  }).enable();
  const [result] = await Promise.allSettled([ours.run(true, body)]);
  hook.disable();
  await settle();
  // A timer of a few ms (a destroy on the next tick) is no wait; ioredis' default disconnectTimeout is 2 s.
  return { result, left: [...started].filter((t) => t._destroyed !== true && t.hasRef() && (t._idleTimeout ?? 0) >= 100).length };
}

/** Let ioredis run its close handlers, which it schedules on the next ticks. */
const settle = () => new Promise<void>((resolve) => setImmediate(() => setImmediate(resolve)));

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

  it('gives up connecting after the timeout, leaving no timer behind', async () => {
    const { result, left } = await timersLeftBy(() => connect({ url: `redis://127.0.0.1:${port}`, timeoutMs: 1_000 }));
    expect(result.status === 'rejected' && String(result.reason)).toMatch(/cannot use Redis at redis:\/\/127\.0\.0\.1:\d+/);
    expect(left).toBe(0);
  });

  it.each<[string[]]>([[['report']], [['inspect', 's']], [['release', 's', '--step', 'x', '--force']], [['doctor']]])(
    'exits 3 after saying why, in one plain message, leaving nothing to hold the process open: fire-once %j',
    async (args) => {
      let err = '';
      const { result, left } = await timersLeftBy(() =>
        main(['node', 'fire-once', ...args, '--redis', `redis://127.0.0.1:${port}`, '--timeout', '1s'], { out: () => {}, err: (t) => (err += t) }),
      );
      expect(err).toBe(`fire-once: cannot use Redis at redis://127.0.0.1:${port}: Command timed out\n`);
      expect(result).toEqual({ status: 'fulfilled', value: 3 });
      expect(left).toBe(0); // the defect: ioredis' disconnectTimeout, 2 s, held the process open after the message
    },
  );
});
