import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { contentHash, defaultBuiltinPath, loadCatalogue } from '../../../src/catalogue/load.js';
import { ManualClock } from '../../../src/clock.js';
import { DfeError } from '../../../src/errors.js';
import { SHIM_CATALOGUE_BUILTINS } from '../../../src/shim/catalogue-builtins.js';

const dir = mkdtempSync(join(tmpdir(), 'dfe-catalogue-load-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const clock = new ManualClock(1_700_000_000_000);
const DBS = { dataDatabase: 'dfe', otelDatabase: 'otel', builtins: SHIM_CATALOGUE_BUILTINS, clock };

async function failure(promise: Promise<unknown>): Promise<DfeError> {
  try {
    await promise;
  } catch (err) {
    return err as DfeError;
  }
  throw new Error('expected a failure');
}

describe('loadCatalogue', () => {
  it('without an override loads the package built-ins', async () => {
    const c = await loadCatalogue(DBS);
    expect({ names: [...c.queries.keys()], source: c.source, loadedAtMs: c.loadedAtMs }).toEqual({
      names: ['backlog', 'pressure'],
      source: { builtinPath: defaultBuiltinPath(), overridePath: undefined, overrideHash: undefined },
      loadedAtMs: 1_700_000_000_000,
    });
  });

  it('merges an override and records its content hash', async () => {
    const text = 'queries:\n  pressure: {enabled: false}\n  extra: {sql: SELECT 2 AS value}\n';
    const path = join(dir, 'override.yaml');
    writeFileSync(path, text);
    const c = await loadCatalogue({ ...DBS, overridePath: path });
    expect({ names: [...c.queries.keys()], hash: c.source.overrideHash }).toEqual({ names: ['backlog', 'extra'], hash: contentHash(text) });
  });

  it('a configured override that does not exist is CATALOGUE_MISSING naming the path', async () => {
    const path = join(dir, 'nope.yaml');
    const err = await failure(loadCatalogue({ ...DBS, overridePath: path }));
    expect([err.code, err.file, err.message.startsWith(`${path}:`)]).toEqual(['CATALOGUE_MISSING', path, true]);
  });

  it('a missing built-in file is CATALOGUE_MISSING too', async () => {
    const err = await failure(loadCatalogue({ ...DBS, builtinPath: join(dir, 'gone.yaml') }));
    expect(err.code).toBe('CATALOGUE_MISSING');
  });

  it('an invalid override is CATALOGUE_INVALID naming the override file', async () => {
    const path = join(dir, 'bad.yaml');
    writeFileSync(path, 'queries:\n  pressure: {clamp_max: -1}\n');
    const err = await failure(loadCatalogue({ ...DBS, overridePath: path }));
    expect([err.code, err.message]).toEqual(['CATALOGUE_INVALID', `${path}: query "pressure" key "clamp_max": -1 is less than clamp_min 0`]);
  });
});
