import { readdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { describe, expect, it } from 'vitest';
import { DfeError, ERRORS, describeError, exitCodeOf, type DfeErrorCode } from '../src/errors.js';
import { statusOf } from '../src/shim/error-handler.js';

/** The one error table (src/errors.ts), held to what docs/api.md#errors promises and to what src throws. */
const ROOT = resolve(import.meta.dirname, '..');
const codes = Object.keys(ERRORS) as DfeErrorCode[];

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? sourceFiles(join(dir, e.name)) : e.name.endsWith('.ts') ? [join(dir, e.name)] : [],
  );
}

/** The rows of the error table in docs/api.md: | `CODE` | status | exit | meaning |. */
function documentedRows(): Map<string, { httpStatus: number; exitCode: number }> {
  const rows = new Map<string, { httpStatus: number; exitCode: number }>();
  for (const m of readFileSync(join(ROOT, 'docs/api.md'), 'utf8').matchAll(/^\| `([A-Z_]+)` \| (\d{3}) \| (\d) \|/gm)) {
    rows.set(m[1] ?? '', { httpStatus: Number(m[2]), exitCode: Number(m[3]) });
  }
  return rows;
}

describe('the error table', () => {
  it('gives every code an HTTP status and an exit code', () => {
    for (const code of codes) {
      const row = ERRORS[code];
      expect([code, row.httpStatus >= 400 && row.httpStatus < 600, [1, 2].includes(row.exitCode), row.meaning.length > 0]).toEqual([code, true, true, true]);
    }
  });

  it('keeps the statuses and exit codes the docs promise', () => {
    expect({
      QUERY_UNKNOWN: ERRORS.QUERY_UNKNOWN.httpStatus,
      PARAM_INVALID: ERRORS.PARAM_INVALID.httpStatus,
      UNAUTHORIZED: ERRORS.UNAUTHORIZED.httpStatus,
      STALE: ERRORS.STALE.httpStatus,
      CLICKHOUSE_FAILED: ERRORS.CLICKHOUSE_FAILED.httpStatus,
    }).toEqual({ QUERY_UNKNOWN: 404, PARAM_INVALID: 400, UNAUTHORIZED: 401, STALE: 503, CLICKHOUSE_FAILED: 503 });
    // Bad input exits 2 (usage, configuration, an unknown hunt); every other failure 1.
    expect(codes.filter((c) => ERRORS[c].exitCode === 2).sort()).toEqual(['CONFIG_INVALID', 'PARAM_INVALID', 'USAGE']);
  });

  it('is the table docs/api.md shows, row for row', () => {
    const documented = documentedRows();
    expect([...documented.keys()].sort()).toEqual([...codes].sort());
    for (const code of codes) expect({ code, ...documented.get(code) }).toEqual({ code, httpStatus: ERRORS[code].httpStatus, exitCode: ERRORS[code].exitCode });
  });

  it('has no dead code: each is thrown somewhere in src', () => {
    const text = sourceFiles(join(ROOT, 'src'))
      .filter((f) => !f.endsWith(join('src', 'errors.ts')))
      .map((f) => readFileSync(f, 'utf8'))
      .join('\n');
    for (const code of codes) expect({ code, thrown: new RegExp(`DfeError\\(\\s*'${code}'`).test(text) }).toEqual({ code, thrown: true });
  });
});

describe('reading the table', () => {
  it('the shim answers each code with its status; a framework client error keeps its 4xx; anything else is 500', () => {
    for (const code of codes) expect(statusOf(new DfeError(code, 'x'))).toBe(ERRORS[code].httpStatus);
    expect(statusOf(Object.assign(new Error('bad body'), { statusCode: 415 }))).toBe(415);
    expect(statusOf(Object.assign(new Error('boom'), { statusCode: 502 }))).toBe(500);
    expect(statusOf(new Error('boom'))).toBe(500);
  });

  it('a CLI exits with the code of the table; argument-parser errors are usage (2); anything else 1', () => {
    for (const code of codes) expect(exitCodeOf(new DfeError(code, 'x'))).toBe(ERRORS[code].exitCode);
    let parseError: unknown;
    try {
      parseArgs({ args: ['--nope'], options: {}, strict: true });
    } catch (err) {
      parseError = err;
    }
    expect(exitCodeOf(parseError)).toBe(2);
    expect(exitCodeOf(new Error('connect ECONNREFUSED'))).toBe(1);
    expect(exitCodeOf('a string')).toBe(1);
    expect(exitCodeOf(undefined)).toBe(1);
  });

  it('carries an auth challenge as a typed field', () => {
    expect(new DfeError('UNAUTHORIZED', 'unauthorized', { challenge: 'Basic realm="dfe"' }).challenge).toBe('Basic realm="dfe"');
    expect(new DfeError('UNAUTHORIZED', 'unauthorized').challenge).toBeUndefined();
  });
});

describe('describeError', () => {
  it('puts the code before the message once, also when the message already starts with it', () => {
    const system = Object.assign(new Error("ENOENT: no such file or directory, scandir '/x'"), { code: 'ENOENT' });
    expect(describeError(system)).toBe("ENOENT: no such file or directory, scandir '/x'");
    const dfe = new DfeError('USAGE', 'bad flag');
    expect(describeError(dfe)).toBe('USAGE: bad flag');
  });
});
