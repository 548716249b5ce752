import { describe, it, type TestFunction } from 'vitest';

/**
 * Tests that need something outside the repository (a tool, a binary, a mode of the run).
 * Outside CI a missing tool skips the group and prints why; under `CI=true` it is a failing
 * test carrying the install hint, so a CI run cannot turn green by skipping. A requirement
 * of kind 'mode' (the test does not apply to this run, e.g. embedded-engine only) skips in
 * CI too; `.ci/run` then accepts it only if `.ci/allowed-skips.json` lists it with a reason.
 * The reason travels to test/helpers/summary-reporter.ts as the test's `skipReason` meta.
 */
declare module 'vitest' {
  interface TaskMeta {
    skipReason?: string;
  }
}

export type Unmet = string | undefined;
type Kind = 'tool' | 'mode';

/** CI=true (or any value but '', '0', 'false'): the convention of GitHub Actions, GitLab and others. */
export function inCi(env: NodeJS.ProcessEnv = process.env): boolean {
  const value = (env.CI ?? '').trim().toLowerCase();
  return value !== '' && value !== '0' && value !== 'false';
}

export class MissingInCiError extends Error {
  constructor(reason: string) {
    super(`${reason} (CI=true: a missing requirement fails the run instead of skipping)`);
    this.name = 'MissingInCiError';
  }
}

export interface Gate {
  describe(name: string, fn: () => void): void;
  it(name: string, fn: TestFunction, timeout?: number): void;
}

/** `needs(missing('helm')).describe('helm chart', …)`: runs when `unmet` is undefined. */
export function needs(unmet: Unmet, kind: Kind = 'tool'): Gate {
  const fails = unmet !== undefined && kind === 'tool' && inCi();
  const failing = (name: string) => () => {
    it(`${name}: requirement`, () => {
      throw new MissingInCiError(unmet as string);
    });
  };
  const skipped = (name: string) => {
    console.warn(`[skip] ${name} — ${unmet}`);
    return { skip: true, meta: { skipReason: unmet } };
  };
  return {
    describe(name, fn) {
      if (unmet === undefined) describe(name, fn);
      else if (fails) describe(name, failing(name));
      else describe(name, skipped(name), fn);
    },
    it(name, fn, timeout) {
      if (unmet === undefined) it(name, fn, timeout);
      else if (fails) failing(name)();
      else it(name, { ...skipped(name), timeout }, fn);
    },
  };
}
