import { EVENT_FIELDS, parseEvent } from '../../src';
import { toEvent } from '../../src/cli/log';

describe('toEvent (the report fast path of parseEvent)', () => {
  it('agrees with parseEvent on every field, absent fields and unknown ones', () => {
    const full = EVENT_FIELDS.flatMap((name, i) => [name, ['attempt', 'fencingToken', 'ts'].includes(name) ? String(i * 7) : `v-${name}-é`]);
    const samples: string[][] = [
      full,
      ['decision', 'dispatched', 'scope', 's', 'step', 'x', 'jobType', 'j'],
      ['decision', 'committed', 'holder', 'abc', 'future-field', 'ignored', 'ts', '1700000000000'],
      [],
    ];
    for (const fields of samples) expect(toEvent(fields)).toEqual(parseEvent(fields));
  });
});
