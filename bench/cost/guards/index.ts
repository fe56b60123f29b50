import type { GuardFactory } from './types';
import { createNaive } from './naive';
import { createOurs } from './ours';
import { createPowertools } from './powertools';
import { createRedlock } from './redlock';
import { createSemaphore } from './semaphore';

export type { BenchStep, Decision, GuardFactory, GuardUnderTest } from './types';
export { ARTIFACT_TTL_MS, LOCK_TTL_MS, UnexpectedRunError } from './types';

/** Every guard the cost bench compares, ours first. */
export const GUARDS: ReadonlyArray<{ readonly id: string; readonly create: GuardFactory }> = [
  { id: 'ours', create: createOurs },
  { id: 'redlock', create: createRedlock },
  { id: 'redis-semaphore', create: createSemaphore },
  { id: 'powertools', create: createPowertools },
  { id: 'naive', create: createNaive },
];
