/** Commander argument parsers the benches share: a bad value exits with commander's message. */
import { InvalidArgumentError } from 'commander';

function integerAtLeast(min: number, what: string) {
  return (value: string): number => {
    const n = Number(value);
    if (value.trim() === '' || !Number.isInteger(n) || n < min) throw new InvalidArgumentError(`must be a ${what} integer (got ${JSON.stringify(value)})`);
    return n;
  };
}

/** `--runs <n>` and the like: 1, 2, 3... */
export const positiveInt = integerAtLeast(1, 'positive');

/** `--spacing-ms <ms>` and the like: 0, 1, 2... */
export const nonNegativeInt = integerAtLeast(0, 'non-negative');
