import { ApplicationFailure } from '@temporalio/common';
import { getDispatchScope, setDispatchScope } from '../../src/workflow';

// setDispatchScope belongs in a workflow. Called anywhere else (an activity, a client, a test),
// it set a global of the process that no activity reads, so the mistake only showed later as a
// FireOnceMissingScope; the Python package raises at once. It now throws where it is called.
describe('setDispatchScope outside a workflow', () => {
  it('throws a non-retryable FireOnceConfigError naming the mistake, and sets nothing', () => {
    let thrown: unknown;
    try {
      setDispatchScope('session-1');
    } catch (err) {
      thrown = err;
    }
    expect(thrown).toBeInstanceOf(ApplicationFailure);
    expect(thrown).toMatchObject({ type: 'FireOnceConfigError', nonRetryable: true });
    expect((thrown as Error).message).toMatch(/^setDispatchScope\(\) must be called in a workflow/);
    expect(getDispatchScope()).toBeUndefined();
  });
});
