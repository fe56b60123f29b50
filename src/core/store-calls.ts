import { FireOnceError, FireOnceProtocolError, FireOnceStoreUnavailable, type FireOnceErrorContext } from './errors';

/** A call in flight: when it times out, and what to do then. */
interface Pending {
  readonly deadline: number;
  /** Dropped once the call settles, so a settled call holds no reply until its entry is swept. */
  expire: (() => void) | undefined;
}

/** Settled calls at the head of the queue beyond which it is compacted. */
const COMPACT_AT = 1024;

/**
 * Every Redis call of the guard, bounded by `storeTimeoutMs`: past it the call fails closed with
 * {@link FireOnceStoreUnavailable}. ioredis keeps a command queued while Redis is unreachable and
 * runs it once Redis is back, so a call that timed out may still land later; the error carries
 * that call as `late`, so the caller can find out and report what really happened.
 *
 * One timer serves every call, not one per call: the timeout is the same for all, so deadlines
 * come in the order the calls do, and a queue swept from its head finds every expired call. A
 * timer armed and cleared around each call cost a few microseconds of CPU per call, the largest
 * JS-side cost of a fast-forward after the socket write itself (bench/RESULTS.md, issue 11). The
 * timer keeps the process alive only while a call is open, as a timer per call did.
 */
export class StoreCalls {
  private readonly queue: Pending[] = [];
  private head = 0;
  private timer: NodeJS.Timeout | undefined;
  /** Calls neither settled nor expired. */
  private open = 0;

  constructor(private readonly timeoutMs: number) {}

  /**
   * Await `op` for at most the timeout. `context` is built only on failure. `onTimeout` runs when
   * the timeout fires, before the caller hears of it.
   */
  run<T>(context: () => FireOnceErrorContext, op: Promise<T>, onTimeout?: () => void): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const pending: Pending = {
        deadline: performance.now() + this.timeoutMs,
        expire: () => {
          onTimeout?.();
          reject(new FireOnceStoreUnavailable(`Redis did not answer within ${this.timeoutMs} ms`, context(), { late: op }));
        },
      };
      this.enqueue(pending);
      op.then(
        (value) => {
          if (!this.settle(pending)) return;
          resolve(value);
        },
        (err: unknown) => {
          if (!this.settle(pending)) return;
          if (err instanceof FireOnceError) return reject(err);
          const message = err instanceof Error ? err.message : String(err);
          // Data of a type we never write does not change on a retry: fail, do not stall.
          if (isWrongType(err))
            return reject(
              new FireOnceProtocolError(`a key of this step holds a Redis type this library never writes there (${message})`, context(), { cause: err }),
            );
          reject(new FireOnceStoreUnavailable(`Redis call failed: ${message}`, context(), { cause: err }));
        },
      );
    });
  }

  /** Queue a call, first dropping the settled calls at the head (so serial calls keep it short). */
  private enqueue(pending: Pending): void {
    const { queue } = this;
    while (this.head < queue.length && queue[this.head].expire === undefined) this.head++;
    this.compact();
    queue.push(pending);
    if (this.timer === undefined) this.timer = this.arm(this.timeoutMs);
    else if (this.open === 0) this.timer.ref();
    this.open++;
  }

  /** Mark a call settled (false if it had expired already); the last open call unrefs the timer. */
  private settle(pending: Pending): boolean {
    if (pending.expire === undefined) return false;
    pending.expire = undefined;
    if (--this.open === 0) this.timer?.unref();
    return true;
  }

  private arm(delayMs: number): NodeJS.Timeout {
    return setTimeout(this.sweep, Math.max(0, Math.ceil(delayMs)));
  }

  /** Expire every call past its deadline, drop the settled ones, and wait for the next deadline. */
  private readonly sweep = (): void => {
    this.timer = undefined;
    const now = performance.now();
    const { queue } = this;
    while (this.head < queue.length) {
      const pending = queue[this.head];
      const { expire } = pending;
      if (expire !== undefined) {
        if (pending.deadline > now) break;
        this.settle(pending);
        expire();
      }
      this.head++;
    }
    this.compact();
    if (queue.length === 0) return;
    this.timer = this.arm(queue[this.head].deadline - now);
    if (this.open === 0) this.timer.unref();
  };

  /**
   * Drop the settled and expired calls before the head: at once when no other call is queued, else
   * in one splice once there are {@link COMPACT_AT} of them.
   */
  private compact(): void {
    if (this.head === this.queue.length) {
      this.queue.length = 0;
      this.head = 0;
    } else if (this.head >= COMPACT_AT) {
      this.queue.splice(0, this.head);
      this.head = 0;
    }
  }
}

/** Redis refused a command on a key of another type: data this library never wrote there. */
export function isWrongType(err: unknown): boolean {
  // Redis before 7.0 wraps a script's error: 'ERR Error running script (…): @user_script:18: WRONGTYPE …'.
  return err instanceof Error && /(^|: )WRONGTYPE\b/.test(err.message);
}

/** Resolves when `done` does, or after `ms` if that comes first: for waits a stopping worker bounds. */
export async function atMost(done: Promise<unknown>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<void>((resolve) => (timer = setTimeout(resolve, ms)));
  await Promise.race([done, late]).finally(() => clearTimeout(timer));
}
