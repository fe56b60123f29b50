import { handOffOf } from '../../src/common/hand-off';

// Which local activity failures the workflow interceptor schedules again (src/common/hand-off.ts).
// The worker's side, which makes the failure, is test/worker/hand-off.test.ts.
describe('handOffOf', () => {
  const context = { activityType: 'job', key: 'p:v3:{default/s}:l:job', scope: 's', step: 'job', jobType: 'job' };
  const failure = (details: unknown[] | undefined, overrides: { type?: string; nonRetryable?: boolean } = {}) => ({
    type: 'FireOnceWorkerShutdown',
    nonRetryable: true,
    details,
    ...overrides,
  });

  it('reads the attempt the failure ended', () => {
    expect(handOffOf(failure([{ ...context, attempt: 3 }]))).toEqual({ attempt: 3 });
  });

  it('takes a failure recorded without the attempt (0.9.0 before defect 154), which goes by the attempt scheduled', () => {
    expect(handOffOf(failure([context]))).toEqual({ attempt: undefined });
    expect(handOffOf(failure([{ ...context, attempt: 0 }]))).toEqual({ attempt: undefined });
  });

  it.each([
    ['another type', failure([context], { type: 'FireOnceInFlight' })],
    ['a retryable one', failure([context], { nonRetryable: false })],
    ['one without details (raised by an activity itself)', failure(undefined)],
    ['one whose first detail is not the guard context', failure([{ scope: 's' }])],
    ['one whose first detail is not an object', failure(['FireOnceWorkerShutdown'])],
  ])('is not the hand-off: %s', (_, f) => {
    expect(handOffOf(f)).toBeUndefined();
  });
});
