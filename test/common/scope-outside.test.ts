import { ApplicationFailure } from '@temporalio/common';
import { getDispatchScope, setDispatchScope } from '../../src/workflow';

// setDispatchScope belongs in a workflow. Called anywhere else (an activity, a client, a test),
// it set a global of the process that no activity reads, so the mistake only showed later as a
// FireOnceMissingScope; the Python package raises at once. It now throws where it is called.
// getDispatchScope too: outside a workflow it answered `undefined`, which reads as "no scope set"
// in an activity whose workflow did set one, where Python's get_dispatch_scope raises.
describe('setDispatchScope and getDispatchScope outside a workflow', () => {
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
    expect(workflowGlobalScope()).toBeUndefined();
  });

  it('getDispatchScope throws the same FireOnceConfigError, naming where an activity finds its scope', () => {
    let thrown: unknown;
    try {
      getDispatchScope();
    } catch (err) {
      thrown = err;
    }
    expect(thrown).toBeInstanceOf(ApplicationFailure);
    expect(thrown).toMatchObject({ type: 'FireOnceConfigError', nonRetryable: true });
    expect((thrown as Error).message).toMatch(/^getDispatchScope\(\) must be called in a workflow: .*fireOnceContext\(\)\.scope/);
  });
});

/** The slot setDispatchScope writes, read directly: nothing may have been set on this process's global. */
function workflowGlobalScope(): unknown {
  return (globalThis as Record<string, unknown>).__temporalFireOnceDispatchScope;
}
