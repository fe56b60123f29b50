import { FireOnce, fireOnce } from '../../src';

// Type-level contract, checked by `npm run typecheck` (tsc over test/): a call that may resolve
// without running the activity ('skip', external artifacts) type-checks only on Promise<void>.
describe('fireOnce typing', () => {
  it('accepts skip and external artifacts only on Promise<void> activities', () => {
    const dispatch = async (_id: string): Promise<void> => undefined;
    const compute = async (id: string): Promise<string> => id;

    fireOnce(dispatch, { onInFlight: 'skip' });
    fireOnce(dispatch, { artifact: { external: ({ scope }) => `x:{${scope}}` } });
    fireOnce(compute, { onInFlight: 'fail', scope: ([id]) => id });
    // @ts-expect-error a value-returning activity cannot be skipped
    fireOnce(compute, { onInFlight: 'skip' });
    // @ts-expect-error a value-returning activity cannot use an external artifact
    fireOnce(compute, { artifact: { external: () => 'k' } });

    class Ok {
      @FireOnce({ onInFlight: 'skip' })
      async send(): Promise<void> {}
    }
    class Bad {
      // @ts-expect-error skip on a method that returns a value
      @FireOnce({ onInFlight: 'skip' })
      async compute(): Promise<number> {
        return 1;
      }
    }
    expect(Object.keys(new Ok())).toEqual(['send']);
    expect(Object.keys(new Bad())).toEqual(['compute']);
  });
});
