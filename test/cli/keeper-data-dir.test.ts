import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { freePort } from '../helpers/ports.js';
import { runNode } from '../helpers/run-process.js';

/**
 * The README's path to this mistake: `npm start` writes its Keeper claim table (KeeperMap) into
 * the default data directory; a program started on that directory later without the demo's
 * config file cannot attach it. The engine says only that it could not connect; the programs
 * name the setting (src/clickhouse/embedded.ts, whyNotOpened). Processes, one after another:
 * one data directory per process (docs/embedded.md).
 */
const ROOT = resolve(import.meta.dirname, '../..');
const RUNNER = join(ROOT, 'dist/src/cli/hunt-runner.js');
const SHIM = join(ROOT, 'dist/src/cli/shim.js');
const KEEPER_CONFIG = join(ROOT, 'examples/embedded-keeper.xml');
const dataDir = mkdtempSync(join(tmpdir(), 'dfe-keeper-dir-'));

afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

function env(extra: Record<string, string>): NodeJS.ProcessEnv {
  const out: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) if (!key.startsWith('DFE_')) out[key] = value;
  return { ...out, LOG_LEVEL: 'warn', DFE_EMBEDDED_PATH: dataDir, ...extra };
}

describe('a data directory with Keeper tables, opened without Keeper', () => {
  it('stops with exit 2 and names DFE_EMBEDDED_CONFIG_FILE, the directory and the table; with the config it opens', async () => {
    expect(existsSync(RUNNER), 'the compiled CLI (test/global-setup.ts builds it)').toBe(true);
    const schema = await runNode([RUNNER, 'schema', '--apply', '--claims', 'keeper'], env({ DFE_EMBEDDED_CONFIG_FILE: KEEPER_CONFIG }));
    expect(schema.code, schema.stderr).toBe(0);
    expect(schema.stdout).toMatch(/claims: keeper/);

    for (const [program, args] of [
      ['dfe-hunt-runner due', [RUNNER, 'due']],
      ['dfe-keda-shim', [SHIM]],
    ] as const) {
      const refused = await runNode([...args], env({ DFE_KEDA_SHIM_PORT: String(await freePort()) }));
      expect(refused.code, `${program}: ${refused.stderr}`).toBe(2);
      const lastLine = refused.stderr.trim().split('\n').at(-1) ?? '';
      expect(lastLine).toContain(`${program}: `);
      expect(lastLine).toContain(`DFE_EMBEDDED_PATH=${JSON.stringify(dataDir)}`);
      expect(lastLine).toContain('KeeperMap tables (dfe.hunt_claim)');
      expect(lastLine).toContain('DFE_EMBEDDED_CONFIG_FILE is not set');
    }

    const withKeeper = await runNode([RUNNER, 'due', '--json'], env({ DFE_EMBEDDED_CONFIG_FILE: KEEPER_CONFIG }));
    expect(withKeeper.code, withKeeper.stderr).toBe(0);
    expect(withKeeper.stdout.trim()).toBe('[]');
  });
});
