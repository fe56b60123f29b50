import type { WorkerOptions } from '@temporalio/worker';
import type { Redis } from 'ioredis';
import { FireOnceConfigError, FireOncePlugin, type FireOnceGuard } from '../../src';
import { parseEvent } from '../../src/core';
import { useGuardFixture } from '../support/redis';

// Keys are filed under each activity's Temporal namespace unless keyNamespace is set, so
// plugin.invalidate(scope, jobType) must delete the result of the namespace its workers run in,
// never another namespace's: a plugin that cannot tell which namespace is meant refuses.
describe('FireOncePlugin.invalidate', () => {
  const fx = useGuardFixture('plugin-invalidate');
  let redis: Redis;
  let prefix: string;
  let guard: FireOnceGuard;
  beforeEach(() => ({ redis, prefix, guard } = fx));

  const artifact = (namespace: string) => guard.keysFor(namespace).artifact('s', 'summary');
  /** A stored result of `(s, summary)` in each namespace, committed as a worker would. */
  async function storeIn(...namespaces: string[]): Promise<void> {
    for (const namespace of namespaces) {
      const outcome = await guard.acquire({ scope: 's', step: 'summarise', jobType: 'summary', namespace });
      if (outcome.kind !== 'acquired') throw new Error(outcome.kind);
      await guard.commit(outcome.lease, Buffer.from(`result of ${namespace}`));
    }
  }
  const exists = async (...namespaces: string[]) => Promise.all(namespaces.map(async (ns) => (await redis.exists(artifact(ns))) === 1));
  const pluginWith = (options: { keyNamespace?: string } = {}) => new FireOncePlugin({ redis, keyPrefix: prefix, ...options });
  const workerIn = (plugin: FireOncePlugin, namespace: string) => plugin.configureWorker({ namespace, taskQueue: 'q', activities: {} } as WorkerOptions);

  it("deletes the result of the namespace the plugin's worker runs in, not default's, and logs it there", async () => {
    await storeIn('default', 'ns2');
    const plugin = pluginWith();
    workerIn(plugin, 'ns2');
    expect(await plugin.invalidate('s', 'summary')).toBe(true);
    expect(await exists('default', 'ns2')).toEqual([true, false]);
    await plugin.dispatchLog?.flush();
    const entries = await redis.xrange(guard.keysFor('ns2').log(), '-', '+');
    expect(entries.map(([, fields]) => parseEvent(fields))).toContainEqual(
      expect.objectContaining({ decision: 'invalidated', namespace: 'ns2', scope: 's', jobType: 'summary' }),
    );
    expect(await redis.exists(guard.keysFor('default').log())).toBe(0);
  });

  it('deletes the keyNamespace result when keyNamespace is set, whatever namespace the workers run in', async () => {
    await storeIn('default', 'shared');
    const plugin = pluginWith({ keyNamespace: 'shared' });
    workerIn(plugin, 'ns2');
    expect(await plugin.invalidate('s', 'summary')).toBe(true);
    expect(await exists('default', 'shared')).toEqual([true, false]);
  });

  it.each([
    ['no worker', [] as string[]],
    ['workers in two namespaces', ['ns2', 'ns3']],
  ])('refuses without a namespace when the plugin has %s, deleting nothing', async (_what, namespaces) => {
    await storeIn('default', 'ns2', 'ns3');
    const plugin = pluginWith();
    for (const namespace of namespaces) workerIn(plugin, namespace);
    await expect(plugin.invalidate('s', 'summary')).rejects.toThrow(FireOnceConfigError);
    await expect(plugin.invalidate('s', 'summary')).rejects.toThrow(/invalidate: say whose result: .*pass the namespace/);
    expect(await exists('default', 'ns2', 'ns3')).toEqual([true, true, true]);
    // Named, it deletes that namespace's only.
    expect(await plugin.invalidate('s', 'summary', 'ns3')).toBe(true);
    expect(await exists('default', 'ns2', 'ns3')).toEqual([true, true, false]);
  });
});
