import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { historyFromJSON } from '@temporalio/common/lib/proto-utils';
import type { temporal } from '@temporalio/proto';

export type History = temporal.api.history.v1.IHistory;

/** Where a release's recorded histories are (test/fixtures/histories-<version>), one directory per language. */
export function historiesDir(version: string, language: 'ts' | 'python'): string {
  return join(__dirname, '..', 'fixtures', `histories-${version}`, language);
}

/** A recorded history, named by its file (`fires.json`: `fires`), and the workflow ID it ran under (a child's ID derives from it). */
export interface Recorded {
  readonly name: string;
  readonly workflowId: string;
  readonly history: History;
}

/** The histories a release recorded in `language`, in name order; fresh objects on each call. */
export function recordedHistories(version: string, language: 'ts' | 'python'): Recorded[] {
  const dir = historiesDir(version, language);
  return readdirSync(dir)
    .filter((file) => file.endsWith('.json'))
    .sort()
    .map((file) => {
      const history = historyFromJSON(JSON.parse(readFileSync(join(dir, file), 'utf8')));
      const workflowId = history.events?.[0]?.workflowExecutionStartedEventAttributes?.workflowId;
      if (!workflowId) throw new Error(`${file} does not start with a WorkflowExecutionStarted event that names its workflow ID`);
      return { name: file.replace(/\.json$/, ''), workflowId, history };
    });
}
