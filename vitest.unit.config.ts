import { defineConfig } from 'vitest/config';

/**
 * The fast lane (`npm run test:unit`): the pure folders — no ClickHouse, no
 * network, no build of dist/, no child processes. A test belongs in a pure
 * folder (`test/<area>/pure/`, or an area that is pure as a whole) only if it
 * needs none of that. `npm test` runs these too, with everything else.
 */
export default defineConfig({
  test: {
    include: [
      // Areas that are pure as a whole.
      'test/schedule/**/*.test.ts',
      'test/config/**/*.test.ts',
      'test/model/claims/**/*.test.ts',
      // The pure part of an area.
      'test/*/pure/**/*.test.ts',
      // The root modules (errors, log).
      'test/*.test.ts',
    ],
    pool: 'forks',
    maxWorkers: 2,
    testTimeout: 20_000,
  },
});
