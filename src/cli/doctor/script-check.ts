import { createHash } from 'node:crypto';
import * as coreScripts from '../../core/scripts';
import { replyErrorMessage } from '../../core/deployment/settings';
import type { DoctorNode } from './topology';
import { verdict, type Verdict } from './verdict';

/** The guard's scripts: every `defineScript` export of the core (whatever their names and versions). */
function guardScripts(): { command: string; sha: string }[] {
  return (Object.values(coreScripts) as unknown[])
    .filter((v): v is { command: string; lua: string } => typeof v === 'function' && typeof (v as { lua?: unknown }).lua === 'string')
    .map((s) => ({ command: s.command, sha: createHash('sha1').update(s.lua).digest('hex') }));
}

/**
 * The guard decides in Lua scripts: `EVAL` must run. Which of its scripts the server has cached
 * is reported, not judged: ioredis sends `EVALSHA` and falls back to `EVAL` after `NOSCRIPT`, so
 * an empty cache (after a restart, a failover, `SCRIPT FLUSH`) costs one round trip per script.
 */
export async function checkScripts(node: DoctorNode): Promise<Verdict> {
  const at = { node: node.address };
  try {
    if ((await node.client.eval('return 1', 0)) !== 1) throw new Error('EVAL "return 1" did not return 1');
  } catch (err) {
    return verdict('scripts', 'fail', `EVAL does not run (${replyErrorMessage(err)}): the guard makes every decision in a Lua script`, {
      ...at,
      fix: 'allow EVAL and EVALSHA (a proxy or a managed plan may block scripting)',
    });
  }
  const scripts = guardScripts();
  try {
    const cached = (await node.client.call('SCRIPT', 'EXISTS', ...scripts.map((s) => s.sha))) as number[];
    const names = scripts.filter((_, i) => cached[i] === 1).map((s) => s.command);
    return verdict(
      'scripts',
      'ok',
      `EVAL runs; ${names.length} of ${scripts.length} guard scripts cached${names.length > 0 ? ` (${names.join(', ')})` : ''}; the others load on first use`,
      at,
    );
  } catch (err) {
    return verdict('scripts', 'ok', `EVAL runs; the script cache could not be listed (${replyErrorMessage(err)})`, at);
  }
}
