/**
 * `npm run docs:performance`: docs/performance.md and the README's performance table rendered
 * again from docs/performance.json (the last full bench run) and docs/control-plane.json (the
 * e2e lane's figures), without running anything. Use it after either file changed.
 */
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { renderPerformanceDocs } from './docs.js';

/** The repository root, from the source (bench/) or the build (dist/bench/). */
const root = [resolve(import.meta.dirname, '..'), resolve(import.meta.dirname, '..', '..')].find((dir) => existsSync(join(dir, 'docs', 'performance.json')));
if (root === undefined) throw new Error(`docs/performance.json not found above ${import.meta.dirname}`);
for (const path of renderPerformanceDocs(root)) console.log(`wrote ${path}`);
