// The package ships no types of its own: the one function the guard calls.
declare module 'cluster-key-slot' {
  /** The Redis Cluster hash slot (0 to 16383) of `key`, by its `{hash tag}` if it has one. */
  function calculateSlot(key: string | Buffer): number;
  export = calculateSlot;
}
