import { FireOnceInvalidId, FireOnceStoreUnavailable } from '../../src';
import { StoreCalls } from '../../src/core/store-calls';

const context = () => ({ key: 'k', scope: 's', step: 'p' });
const never = () => new Promise<never>(() => undefined);

describe('StoreCalls', () => {
  it('resolves with the reply, passes a FireOnceError through and wraps any other failure', async () => {
    const calls = new StoreCalls(5_000);
    await expect(calls.run(context, Promise.resolve('reply'))).resolves.toBe('reply');
    await expect(calls.run(context, Promise.reject(new FireOnceInvalidId('bad id')))).rejects.toBeInstanceOf(FireOnceInvalidId);
    const wrapped = calls.run(context, Promise.reject(new Error('ECONNRESET')));
    await expect(wrapped).rejects.toBeInstanceOf(FireOnceStoreUnavailable);
    await expect(wrapped).rejects.toThrow('Redis call failed: ECONNRESET');
  });

  it('fails closed on the calls that never answer, and only on those, with the call as late', async () => {
    const calls = new StoreCalls(40);
    const timedOut: number[] = [];
    const late = Array.from({ length: 5 }, never);
    const runs = Array.from({ length: 300 }, (_, i) =>
      i % 60 === 7
        ? calls
            .run(context, late[(i - 7) / 60], () => timedOut.push(i))
            .then(
              () => 'answered',
              (err: unknown) => err,
            )
        : calls.run(context, Promise.resolve(i)),
    );
    const outcomes = await Promise.all(runs);
    expect(timedOut).toEqual([7, 67, 127, 187, 247]);
    outcomes.forEach((outcome, i) => {
      if (i % 60 !== 7) return expect(outcome).toBe(i);
      expect(outcome).toBeInstanceOf(FireOnceStoreUnavailable);
      expect((outcome as FireOnceStoreUnavailable).message).toBe('Redis did not answer within 40 ms');
      expect((outcome as FireOnceStoreUnavailable & { late?: Promise<unknown> }).late).toBe(late[(i - 7) / 60]);
    });
  });

  it('ignores an answer that comes after the timeout, and keeps timing out later calls', async () => {
    const calls = new StoreCalls(30);
    let answer: (value: string) => void = () => undefined;
    const slow = calls.run(context, new Promise<string>((resolve) => (answer = resolve)));
    await expect(slow).rejects.toBeInstanceOf(FireOnceStoreUnavailable);
    answer('too late');
    await expect(calls.run(context, Promise.resolve('next'))).resolves.toBe('next');
    await expect(calls.run(context, never())).rejects.toThrow('Redis did not answer within 30 ms');
  });
});
