import { failRetryDelay } from '../../src/worker/in-flight';

// 'fail' retries after half the holder's run so far, at most the lock's TTL left: no fixed cap.
describe("'fail' retry delay", () => {
  const now = 1_000_000_000_000;
  const startedAgo = (ms: number) => (now - ms) * 1000; // a fencing token: the holder's start in µs

  it('is half the time the holder has run, at least 100 ms', () => {
    expect(failRetryDelay({ ttlMs: 30_000, fencingToken: startedAgo(4_000) }, now)).toBe(2_000);
    expect(failRetryDelay({ ttlMs: 30_000, fencingToken: startedAgo(50) }, now)).toBe(100);
  });

  it("never outlasts the lock's TTL left, and is not capped at 10 s", () => {
    expect(failRetryDelay({ ttlMs: 30_000, fencingToken: startedAgo(50_000) }, now)).toBe(25_000);
    expect(failRetryDelay({ ttlMs: 3_000, fencingToken: startedAgo(50_000) }, now)).toBe(3_000);
  });

  it('copes with a holder clock ahead of this one', () => {
    expect(failRetryDelay({ ttlMs: 30_000, fencingToken: startedAgo(-5_000) }, now)).toBe(100);
  });
});
