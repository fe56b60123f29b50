import { subscribe, unsubscribe } from 'node:diagnostics_channel';

/** The channel ioredis (6 and later) publishes every command it writes to, on its start. */
const COMMAND_START = 'tracing:ioredis:command:start';

/**
 * Counts the commands that ioredis writes to Redis, through ioredis' own diagnostics channel
 * (its documented command hook). It sees every client in the process, so count while only the
 * guard under test talks to Redis, one decision at a time: then each command is one round trip
 * (none of the guards pipelines or uses MULTI). An `EVALSHA` answered `NOSCRIPT` and retried as
 * `EVAL` counts as the two round trips it is.
 *
 * @example
 * ```ts
 * import { CommandCounter } from './round-trips';
 * const counter = new CommandCounter();
 * counter.start();
 * const before = counter.mark();
 * // ... await redis.get('k') ...
 * console.log(counter.between(before, counter.mark())); // ['get']
 * counter.stop();
 * ```
 */
export class CommandCounter {
  private readonly names: string[] = [];
  private readonly onStart = (message: unknown): void => {
    this.names.push(String((message as { command?: unknown }).command ?? '?'));
  };

  /** Subscribe. Tracing costs a little per command, so stop before timing anything. */
  start(): void {
    subscribe(COMMAND_START, this.onStart);
  }

  /** Unsubscribe; ioredis skips tracing again once no one listens. */
  stop(): void {
    unsubscribe(COMMAND_START, this.onStart);
  }

  /** A position in the command log. */
  mark(): number {
    return this.names.length;
  }

  /** The commands written between two marks, in order. */
  between(from: number, to: number): string[] {
    return this.names.slice(from, to);
  }
}
