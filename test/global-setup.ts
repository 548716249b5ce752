import { execFileSync } from 'node:child_process';
import { resolve } from 'node:path';

/**
 * Builds dist/ once before any test file runs, so tests of the programs run the
 * compiled CLIs exactly as `npm start` and the container do (Node 20 cannot
 * run TypeScript directly).
 */
export default function setup(): void {
  const root = resolve(import.meta.dirname, '..');
  execFileSync(process.execPath, [resolve(root, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.build.json'], {
    cwd: root,
    stdio: 'inherit',
  });
}
