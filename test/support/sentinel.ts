import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { freePort, stopChild } from '../../sample-workflows/services';
import { waitFor } from './wait';

/** One Redis Sentinel this test spawned, monitoring one master. */
export interface SpawnedSentinel {
  /** `redis://127.0.0.1:<port>`: the sentinel's own address, not the master's. */
  readonly url: string;
  readonly port: number;
  stop(): Promise<void>;
}

/**
 * Spawn one sentinel (`redis-server <conf> --sentinel`, which is all `redis-sentinel` is) that
 * monitors `master` as master group `name`, and wait until it answers. For tests that give a
 * sentinel's address where a data node's belongs; test/support/cluster/sentinel.ts has a whole
 * group for failovers.
 */
export async function spawnSentinel(master: { readonly host: string; readonly port: number }, name = 'orders'): Promise<SpawnedSentinel> {
  const dir = mkdtempSync(join(tmpdir(), 'fire-once-sentinel-'));
  const port = await freePort();
  writeFileSync(join(dir, 'sentinel.conf'), `port ${port}\nbind 127.0.0.1\ndir ${dir}\nsentinel monitor ${name} ${master.host} ${master.port} 1\n`);
  const child = spawn('redis-server', [join(dir, 'sentinel.conf'), '--sentinel'], { stdio: 'ignore' });
  const stop = async () => {
    await stopChild(child);
    rmSync(dir, { recursive: true, force: true });
  };
  const probe = new Redis(port, '127.0.0.1', { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
  probe.on('error', () => undefined);
  try {
    await waitFor('the sentinel to answer', async () => {
      if (child.exitCode !== null) throw new Error(`redis-server --sentinel exited with ${child.exitCode}`);
      if (probe.status !== 'ready') await probe.connect();
      return (await probe.ping()) === 'PONG';
    });
  } catch (err) {
    await stop();
    throw err;
  } finally {
    probe.disconnect();
  }
  return { url: `redis://127.0.0.1:${port}`, port, stop };
}
