// The fault suites: `npm run test:faults`. Real processes that are killed, frozen and restarted,
// so they run on their own, in band, and never as part of `npm test` (whose testMatch is
// *.test.ts; these are *.fault.ts).
/** @type {import('jest').Config} */
module.exports = {
  rootDir: '../..',
  testEnvironment: 'node',
  transform: { '^.+\\.ts$': ['ts-jest', { tsconfig: 'tsconfig.json' }] },
  testMatch: ['<rootDir>/test/faults/**/*.fault.ts'],
  globalSetup: '<rootDir>/test/faults/global-setup.ts',
  globalTeardown: '<rootDir>/test/faults/global-teardown.ts',
  testTimeout: 300_000,
  verbose: true,
};
