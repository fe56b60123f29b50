import { ApplicationFailure } from '@temporalio/common';
import type { ActivityInterceptorsFactory } from '@temporalio/worker';
import type { Redis } from 'ioredis';

/**
 * An activity interceptor that holds the guard's FireOnceWorkerShutdown until the activity is
 * cancelled, then throws it: the cancel that reaches a local activity just after its worker's
 * shutdown ended its wait, in the time its failure takes to reach the workflow, taken every time.
 * Sets `heldKey(scope)` (the activity's first argument) once it holds one. Knows nothing of the
 * plugin: a worker of an earlier release uses it too (test/compat).
 */
export const holdHandOff =
  (redis: Redis, heldKey: (scope: string) => string): ActivityInterceptorsFactory =>
  (actx) => ({
    inbound: {
      execute: async (input, next) => {
        try {
          return await next(input);
        } catch (err) {
          if (!(err instanceof ApplicationFailure) || err.type !== 'FireOnceWorkerShutdown') throw err;
          await redis.set(heldKey(String(input.args[0])), '1');
          const signal = actx.cancellationSignal;
          if (!signal.aborted) await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }));
          throw err;
        }
      },
    },
  });
