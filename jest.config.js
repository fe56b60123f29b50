// Two projects, so that a test needing only Redis never waits for a Temporal dev server: jest runs
// a project's global setup only when at least one of its tests is selected. `npx jest test/core`
// starts redis-server alone; `npm test` starts both services once.

/** Suites that talk to Redis (or to nothing) and never to Temporal. */
const REDIS_ONLY = [
  'test/core/',
  'test/conformance/',
  'test/common/',
  'test/bench/',
  'test/docs/',
  'test/security/',
  'test/worker/',
  'test/model/',
  'test/compose.test.ts',
  'test/cli/(?!demo-report)',
  'test/bad-input/(?!ids-both-sides)',
];

const escape = (path) => path.replace(/\./g, '\\.');

const base = {
  testEnvironment: 'node',
  transform: { '^.+\\.ts$': ['ts-jest', { tsconfig: 'tsconfig.json' }] },
};

/** @type {import('jest').Config} */
module.exports = {
  verbose: true,
  testTimeout: 120_000, // a global option: projects cannot set it
  projects: [
    {
      ...base,
      displayName: 'redis',
      testRegex: REDIS_ONLY.map((path) => `/${escape(path)}${path.endsWith('.ts') ? '$' : '.*\\.test\\.ts$'}`),
      globalSetup: '<rootDir>/test/redis-setup.ts',
      globalTeardown: '<rootDir>/test/global-teardown.ts',
    },
    {
      ...base,
      displayName: 'temporal',
      testMatch: ['<rootDir>/test/**/*.test.ts', '<rootDir>/sample-workflows/**/*.test.ts'],
      testPathIgnorePatterns: ['/node_modules/', ...REDIS_ONLY.map((path) => `<rootDir>/${escape(path)}`)],
      globalSetup: '<rootDir>/test/global-setup.ts',
      globalTeardown: '<rootDir>/test/global-teardown.ts',
    },
  ],
};
