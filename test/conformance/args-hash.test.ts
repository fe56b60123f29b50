import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { defaultPayloadConverter } from '@temporalio/common';
import { argsHash } from '../../src/worker/args-hash';

// The args-hash vectors of cases.json (PROTOCOL.md §5): the Python package's pytest checks its own
// hash against the same vectors, so both sides hash the same JSON arguments alike.

interface HashCase {
  readonly name: string;
  readonly args: unknown[];
  readonly bytes?: string[];
  readonly hash: string;
}

const { argsHash: cases } = JSON.parse(readFileSync(join(__dirname, 'cases.json'), 'utf8')) as { argsHash: HashCase[] };

describe('args hash vectors (test/conformance/cases.json)', () => {
  it.each(cases.map((c) => [c.name, c] as const))('%s', (_name, c) => {
    const args = [...c.args, ...(c.bytes ?? []).map((b) => new Uint8Array(Buffer.from(b, 'base64')))];
    expect(argsHash({}, args, defaultPayloadConverter)).toBe(c.hash);
  });
});
