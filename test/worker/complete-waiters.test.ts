// Handing a result to parked waiters when it cannot reach them: what the worker's Temporal client
// is asked to do is recorded (the decision is what is tested; parked.test.ts runs it on Temporal).
import type { ApplicationFailure, PayloadConverter } from '@temporalio/common';
import { completeWaiters, type Completer } from '../../src/worker/hand-over';

describe('completeWaiters', () => {
  it('fails the waiters at once, retryably and naming only its class, when the payload converter cannot read back its result', async () => {
    class UnreadableError extends Error {}
    // A converter of its own, not a composite one: waiters get the value its payload decodes to.
    const converter: PayloadConverter = {
      toPayload: (value) => ({ metadata: { encoding: Buffer.from('json/plain') }, data: Buffer.from(JSON.stringify(value)) }),
      fromPayload: () => {
        throw new UnreadableError('cannot read {"secret":42}');
      },
    };
    const calls: unknown[] = [];
    const client = {
      activity: {
        complete: async (token: Uint8Array) => void calls.push(['complete', Buffer.from(token).toString()]),
        fail: async (token: Uint8Array, failure: ApplicationFailure) =>
          void calls.push(['fail', Buffer.from(token).toString(), failure.type, failure.nonRetryable, failure.message]),
      },
    };
    const warnings: unknown[] = [];
    const log = { warn: (...args: unknown[]) => void warnings.push(args) };
    const completer = { client, log, payloadConverter: converter, payloadCodecs: [] } as unknown as Completer;

    await completeWaiters(completer, [Buffer.from('waiter-1'), Buffer.from('waiter-2')], converter.toPayload({ secret: 42 }));

    const message = 'the payload converter could not read back the result (UnreadableError)';
    expect(calls).toEqual([
      ['fail', 'waiter-1', 'UnreadableError', false, message],
      ['fail', 'waiter-2', 'UnreadableError', false, message],
    ]);
    expect(JSON.stringify(warnings)).not.toContain('secret');
  });
});
