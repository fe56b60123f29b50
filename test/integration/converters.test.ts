import { randomUUID } from 'node:crypto';
import { Client, Connection } from '@temporalio/client';
import { NativeConnection, Worker, type WorkerPlugin } from '@temporalio/worker';
import type { Redis } from 'ioredis';
import type { DataConverter } from '@temporalio/common';
import { FireOncePlugin, fireOnce } from '../../src';
import { connectRedis, deletePrefix, testPrefix } from '../support/redis';
import { AesGcmCodec } from './fixtures/converters/codec';
import { Money } from './fixtures/converters/money';
import type { Seen } from './fixtures/converters/workflows';

// A worker whose payloadConverterPath exports a plain PayloadConverter (not a composite), or a
// custom CompositePayloadConverter, with or without an encryption codec: guarded results must
// reach the workflow as the same value an unguarded activity would give, on the first dispatch, on
// a fast-forward, to a run that waited, and from the local artifact cache.
describe('payload converters and codecs on a real worker', () => {
  const prefix = testPrefix('conv');
  let redis: Redis;
  let native: NativeConnection;
  let connection: Connection;

  beforeAll(async () => {
    redis = connectRedis();
    native = await NativeConnection.connect({ address: process.env.TEMPORAL_ADDRESS });
    connection = await Connection.connect({ address: process.env.TEMPORAL_ADDRESS });
  });

  afterAll(async () => {
    await connection?.close();
    await native?.close();
    await deletePrefix(redis, prefix);
    await redis.quit();
  });

  const plain = { payloadConverterPath: require.resolve('./fixtures/converters/money') };
  const composite = { payloadConverterPath: require.resolve('./fixtures/converters/composite') };

  async function runScenario(
    localCache: boolean,
    dataConverter: DataConverter = plain,
    workflow: 'priceRun' | 'parkedPriceRun' = 'priceRun',
    givenBy: 'worker options' | 'a later plugin' = 'worker options',
  ) {
    const taskQueue = `fire-once-conv-${randomUUID()}`;
    const counter = `${prefix}:dispatches:${randomUUID()}`;
    const activities = {
      price: fireOnce(async (label: string, jobMs: number): Promise<Money> => {
        await redis.incr(counter); // counted outside the guard
        await new Promise((r) => setTimeout(r, jobMs));
        return new Money(1234, label);
      }),
    };
    const plugin = new FireOncePlugin({ redis, keyPrefix: prefix, pollIntervalMs: 50, localCache });
    const worker = await Worker.create({
      connection: native,
      taskQueue,
      workflowsPath: require.resolve('./fixtures/converters/workflows'),
      activities,
      // A plugin listed after the fire-once plugin may set the converter: the worker uses it.
      ...(givenBy === 'worker options' ? { dataConverter, plugins: [plugin] } : { plugins: [plugin, dataConverterPlugin(dataConverter)] }),
    });
    const client = new Client({ connection, dataConverter });
    const scope = `session-${randomUUID()}`;
    const start = (n: string) => client.workflow.execute(workflow, { taskQueue, workflowId: `conv-${n}-${randomUUID()}`, args: [scope, 'EUR', 800] });
    const seen = await worker.runUntil(async () => {
      // The first run dispatches; the second starts while the job is in flight and waits for it.
      const [first, waited] = await Promise.all([start('first'), new Promise((r) => setTimeout(r, 200)).then(() => start('waited'))]);
      const fastForwarded = await start('fast-forward');
      const again = await start('again'); // with localCache, served from the worker's cache
      return [first, waited, fastForwarded, again] as Seen[];
    });
    await plugin.dispatchLog?.flush();
    const parked = (await redis.xrange(plugin.guard.keys.log(), '-', '+')).filter(
      ([, fields]) => fields.includes(scope) && fields.includes('in-flight-parked'),
    ).length;
    return { seen, dispatches: Number(await redis.get(counter)), artifactKey: plugin.guard.keys.artifact(scope, 'price'), parked };
  }

  it.each([false, true])('returns the Money itself under a plain PayloadConverter, on dispatch, wait and fast-forward (localCache %s)', async (localCache) => {
    const { seen, dispatches } = await runScenario(localCache);
    expect(dispatches).toBe(1);
    for (const s of seen) expect(s).toEqual({ isMoney: true, text: '12.34 EUR' });
  });

  it('returns the Money itself under a custom CompositePayloadConverter', async () => {
    const { seen, dispatches } = await runScenario(false, composite);
    expect(dispatches).toBe(1);
    for (const s of seen) expect(s).toEqual({ isMoney: true, text: '12.34 EUR' });
  });

  it('returns the Money itself through an AES-GCM codec, and keeps the artifact encrypted at rest', async () => {
    const { seen, dispatches, artifactKey } = await runScenario(false, { ...composite, payloadCodecs: [new AesGcmCodec()] });
    expect(dispatches).toBe(1);
    for (const s of seen) expect(s).toEqual({ isMoney: true, text: '12.34 EUR' });
    const stored = await storedBytes(artifactKey);
    expect(stored.length).toBeGreaterThan(0);
    expect(stored.some((b) => b.includes('1234 EUR'))).toBe(false); // what the converter alone would store
  });

  it('uses the converter and codec that a plugin listed after it sets, as the worker does: the Money itself, and the artifact encrypted at rest', async () => {
    const { seen, dispatches, artifactKey } = await runScenario(false, { ...plain, payloadCodecs: [new AesGcmCodec()] }, 'priceRun', 'a later plugin');
    expect(dispatches).toBe(1);
    for (const s of seen) expect(s).toEqual({ isMoney: true, text: '12.34 EUR' });
    expect((await storedBytes(artifactKey)).some((b) => b.includes('1234 EUR'))).toBe(false);
  });

  it.each<[string, DataConverter]>([
    ['a plain PayloadConverter', plain],
    ['an AES-GCM codec', { ...composite, payloadCodecs: [new AesGcmCodec()] }],
  ])("a parked waiter ('park') is completed with the Money itself under %s", async (_name, dataConverter) => {
    const { seen, dispatches, parked } = await runScenario(false, dataConverter, 'parkedPriceRun');
    expect(dispatches).toBe(1);
    expect(parked).toBe(1); // the run started while the job was in flight parked, and the commit completed it
    for (const s of seen) expect(s).toEqual({ isMoney: true, text: '12.34 EUR' });
  });

  /** A worker plugin that sets the worker's data converter, as an encryption plugin may. */
  function dataConverterPlugin(dataConverter: DataConverter): WorkerPlugin {
    return { name: 'data-converter', configureWorker: (options) => ({ ...options, dataConverter }) };
  }

  /** Every byte string stored at `key`, whatever its type (the storage layout is not this test's business). */
  async function storedBytes(key: string): Promise<Buffer[]> {
    const type = await redis.type(key);
    if (type === 'string') return [(await redis.getBuffer(key))!];
    if (type === 'hash') return Object.values(await redis.hgetallBuffer(key));
    throw new Error(`no artifact at ${key} (type ${type})`);
  }
});
