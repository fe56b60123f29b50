import { rmSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import rootGlobalTeardown from '../global-teardown';
import { TABLE_FILE, resultsTable } from '../support/faults/report';

/** Stop the shared services, delete the bundle, and print the run's table of dispatches. */
export default async function globalTeardown(): Promise<void> {
  await rootGlobalTeardown();
  const bundle = process.env.FAULTS_WORKFLOW_BUNDLE;
  if (bundle) rmSync(dirname(bundle), { recursive: true, force: true });
  const table = resultsTable();
  if (table) {
    writeFileSync(TABLE_FILE, table);
    process.stdout.write(`\nfault suites (also in ${TABLE_FILE}):\n\n${table}`);
  }
}
