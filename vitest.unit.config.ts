import { defineConfig } from 'vitest/config';

/**
 * The fast lane (`npm run test:unit`): pure modules only — no ClickHouse, no
 * network, no build of dist/, no child processes. `npm test` runs these too,
 * with everything else. A file belongs here only if it needs none of that.
 */
export default defineConfig({
  test: {
    include: [
      'test/schedule/**/*.test.ts',
      'test/model/claims/**/*.test.ts',
      'test/smoothing/{curve,planner,report}.test.ts',
      'test/coordination/{pure-decisions,quorum-retry}.test.ts',
      'test/catalogue/{load,merge,merge-binds,store,validation}.test.ts',
      'test/config/**/*.test.ts',
      'test/shim/{pure,catalogue-warnings}.test.ts',
      'test/errors.test.ts',
      'test/log.test.ts',
    ],
    pool: 'forks',
    maxWorkers: 2,
    testTimeout: 20_000,
  },
});
