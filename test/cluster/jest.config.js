/**
 * The Redis Cluster suite (`npm run test:cluster`): the guarantees again, with the guard on an
 * ioredis Cluster. Its own config because its global setup starts a 3-master cluster next to the
 * Temporal dev server. The files end in `.cluster-test.ts`, not `.test.ts`, so that the main
 * suite's testMatch (every .test.ts under test/) does not pick them up without a cluster.
 *
 * @type {import('jest').Config}
 */
module.exports = {
  rootDir: '../..',
  testEnvironment: 'node',
  transform: { '^.+\\.ts$': ['ts-jest', { tsconfig: 'tsconfig.json' }] },
  testMatch: ['<rootDir>/test/cluster/**/*.cluster-test.ts'],
  globalSetup: '<rootDir>/test/cluster/global-setup.ts',
  globalTeardown: '<rootDir>/test/cluster/global-teardown.ts',
  testTimeout: 180_000,
  verbose: true,
};
