// The cost bench's side-by-side timing: every lane gets one turn per op, in a rotating order.
import { timeInterleaved } from '../../bench/cost/timing';

describe('timeInterleaved', () => {
  it('gives every lane one turn per op, the first turn moving on by one lane each op', async () => {
    const order: string[] = [];
    const lane = (name: string) => async (i: number) => void order.push(`${name}${i}`);
    const samples = await timeInterleaved(3, [lane('a'), lane('b'), lane('c')]);
    expect(order).toEqual(['a0', 'b0', 'c0', 'b1', 'c1', 'a1', 'c2', 'a2', 'b2']);
    expect(samples.map((lane) => lane.length)).toEqual([3, 3, 3]);
    expect(samples.flat().every((ns) => typeof ns === 'bigint' && ns >= BigInt(0))).toBe(true);
  });
});
