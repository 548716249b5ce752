import { execFileSync } from 'node:child_process';
import { resolve } from 'node:path';
import { startClickHouseContainer } from './helpers/clickhouse.js';

/**
 * Builds dist/ once before any test file runs, so tests of the programs run the
 * compiled CLIs exactly as `npm start` and the container do (Node 20 cannot
 * run TypeScript directly). Then the ClickHouse backend of the run: a container where a
 * Docker engine answers (helpers/clickhouse.ts), else as configured, said in one line.
 */
export default async function setup(): Promise<() => Promise<void>> {
  const root = resolve(import.meta.dirname, '..');
  execFileSync(process.execPath, [resolve(root, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.build.json'], {
    cwd: root,
    stdio: 'inherit',
  });
  const backend = await startClickHouseContainer();
  return async () => {
    if (backend.kind === 'container') await backend.stop();
  };
}
