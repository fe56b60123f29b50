/**
 * Run `op(0)` … `op(ops - 1)` one after another and time each, in nanoseconds.
 *
 * @example
 * ```ts
 * import { timeSerial } from './timing';
 * void timeSerial(3, async () => undefined).then((ns) => console.log(ns.length)); // 3
 * ```
 */
export async function timeSerial(ops: number, op: (i: number) => Promise<unknown>): Promise<bigint[]> {
  const samples: bigint[] = new Array<bigint>(ops);
  for (let i = 0; i < ops; i++) {
    const start = process.hrtime.bigint();
    await op(i);
    samples[i] = process.hrtime.bigint() - start;
  }
  return samples;
}

/**
 * Run `op(0)` … `op(ops - 1)` with `concurrency` of them in flight at all times, and return the
 * rate in operations per second of wall-clock time.
 *
 * @example
 * ```ts
 * import { opsPerSecond } from './timing';
 * void opsPerSecond(100, 8, async () => undefined).then((rate) => console.log(rate > 0)); // true
 * ```
 */
export async function opsPerSecond(ops: number, concurrency: number, op: (i: number) => Promise<unknown>): Promise<number> {
  let next = 0;
  const lane = async (): Promise<void> => {
    while (next < ops) await op(next++);
  };
  const start = process.hrtime.bigint();
  await Promise.all(Array.from({ length: Math.min(concurrency, ops) }, lane));
  const seconds = Number(process.hrtime.bigint() - start) / 1e9;
  return ops / seconds;
}

/**
 * Time `ops` operations of each lane, one at a time, the lanes taking turns op by op (the lane
 * that goes first moves on by one each op), so that every lane meets the same moments of a noisy
 * machine. Returns each lane's samples in nanoseconds, in lane order.
 *
 * @example
 * ```ts
 * import { timeInterleaved } from './timing';
 * void timeInterleaved(3, [async () => undefined, async () => undefined]).then((ns) => console.log(ns.map((s) => s.length))); // [3, 3]
 * ```
 */
export async function timeInterleaved(ops: number, lanes: readonly ((i: number) => Promise<unknown>)[]): Promise<bigint[][]> {
  const samples = lanes.map(() => new Array<bigint>(ops));
  for (let i = 0; i < ops; i++) {
    for (let turn = 0; turn < lanes.length; turn++) {
      const lane = (i + turn) % lanes.length;
      const start = process.hrtime.bigint();
      await lanes[lane](i);
      samples[lane][i] = process.hrtime.bigint() - start;
    }
  }
  return samples;
}
