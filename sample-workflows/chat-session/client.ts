import { randomBytes } from 'node:crypto';
import { Client, Connection, type WorkflowHandle } from '@temporalio/client';
import { Redis } from 'ioredis';
import { chatTurn, chatTurnUnguarded } from './workflows';
import { DEFAULT_KEY_PREFIX, TASK_QUEUE, chatKeys, type ChatKeys } from './config';
import { intFromEnv, redisUrl, runMain, temporalAddress } from '../shared/env';
import { readCount, sleep, waitUntil } from '../shared/redis';

/** `guarded` runs `chatTurn`; `unguarded` runs `chatTurnUnguarded`, the seed's bug. */
export type Strategy = 'guarded' | 'unguarded';

/** One user message of a session. */
export interface MessageOptions {
  readonly taskQueue: string;
  readonly sessionId: string;
  readonly strategy: Strategy;
  readonly text: string;
}

/**
 * Send one user message: start a new workflow run for the session. Its workflow ID is the
 * message's own; only the session ID ties it to the other runs.
 */
export async function sendMessage(client: Client, options: MessageOptions): Promise<WorkflowHandle> {
  const workflow = options.strategy === 'guarded' ? chatTurn : chatTurnUnguarded;
  return await client.workflow.start(workflow, {
    taskQueue: options.taskQueue,
    workflowId: `${options.sessionId}-msg-${randomBytes(4).toString('hex')}`,
    args: [{ sessionId: options.sessionId, message: options.text }],
  });
}

/** A burst of messages sent while the first one's job is in flight. */
export interface BurstOptions extends Omit<MessageOptions, 'text'> {
  readonly redis: Redis;
  /** The sample's keys: the burst watches the dispatch counter and the session's summary. */
  readonly keys: ChatKeys;
  /** Messages in all, the first included. */
  readonly invocations: number;
  /** Gap between two messages of the burst after the first. */
  readonly spacingMs: number;
}

/**
 * Send one message, wait until its job is dispatched (in flight), then send the rest
 * `spacingMs` apart, each a new run of the same session. Resolves with every run's result.
 * A session whose summary already exists dispatches nothing: then the rest follow at once.
 */
export async function sendBurst(client: Client, options: BurstOptions): Promise<string[]> {
  const { redis, keys, invocations, spacingMs, ...message } = options;
  if (!Number.isInteger(invocations) || invocations < 1) throw new Error(`a burst needs at least 1 message (got ${invocations})`);
  const before = await readCount(redis, keys.sessionDispatches(message.sessionId));
  const handles = [await sendMessage(client, { ...message, text: 'message 1' })];
  await waitUntil(`the first message of ${message.sessionId} to dispatch its job`, async () => {
    return (await readCount(redis, keys.sessionDispatches(message.sessionId))) > before || (await redis.exists(keys.summary(message.sessionId))) === 1;
  });
  for (let i = 2; i <= invocations; i++) {
    handles.push(await sendMessage(client, { ...message, text: `message ${i}` }));
    if (i < invocations) await sleep(spacingMs);
  }
  return await Promise.all(handles.map((handle) => handle.result() as Promise<string>));
}

if (require.main === module) {
  runMain(async () => {
    const connection = await Connection.connect({ address: temporalAddress() });
    const redis = new Redis(redisUrl());
    const keys = chatKeys(process.env.KEY_PREFIX ?? DEFAULT_KEY_PREFIX);
    const strategy: Strategy = process.env.STRATEGY === 'unguarded' ? 'unguarded' : 'guarded';
    try {
      const client = new Client({ connection });
      const sessionId = process.env.SESSION_ID ?? `session-${randomBytes(3).toString('hex')}`;
      const before = await readCount(redis, keys.sessionDispatches(sessionId));
      const invocations = intFromEnv('INVOCATIONS', 8);
      const results = await sendBurst(client, {
        taskQueue: TASK_QUEUE,
        sessionId,
        strategy,
        redis,
        keys,
        invocations,
        spacingMs: 7,
      });
      const dispatches = (await readCount(redis, keys.sessionDispatches(sessionId))) - before; // this session's alone
      console.log(`${strategy}: ${invocations} messages to ${sessionId}, ${dispatches} dispatch(es)`);
      for (const result of new Set(results)) console.log(`  ${result}`);
    } finally {
      redis.disconnect();
      await connection.close();
    }
  });
}
