import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

/** scripts/image/node-heap: the image's Node heap, derived from the container memory limit. */
const script = resolve(import.meta.dirname, '../../scripts/image/node-heap');
const dir = mkdtempSync(join(tmpdir(), 'dfe-node-heap-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function heapFor(files: Record<string, string>, env: Record<string, string> = {}): string {
  const root = mkdtempSync(join(dir, 'cg-'));
  for (const [name, content] of Object.entries(files)) {
    mkdirSync(join(root, name, '..'), { recursive: true });
    writeFileSync(join(root, name), content);
  }
  const run = spawnSync('sh', [script], { env: { PATH: process.env.PATH ?? '', DFE_CGROUP_ROOT: root, ...env }, encoding: 'utf8' });
  expect(run.status).toBe(0);
  return run.stdout.trim();
}

describe('node-heap', () => {
  it('old space half the cgroup v2 or v1 limit, semi-space a 64th; nothing without a limit; the explicit heap wins', () => {
    expect(heapFor({ 'memory.max': '268435456\n' })).toBe('--max-old-space-size=128 --max-semi-space-size=4');
    expect(heapFor({ 'memory/memory.limit_in_bytes': '2147483648\n' })).toBe('--max-old-space-size=1024 --max-semi-space-size=16');
    expect(heapFor({ 'memory.max': 'max\n' })).toBe('');
    expect(heapFor({ 'memory/memory.limit_in_bytes': '9223372036854771712\n' })).toBe('');
    expect(heapFor({})).toBe('');
    expect(heapFor({ 'memory.max': '33554432\n' })).toBe('--max-old-space-size=32 --max-semi-space-size=2');
    expect(heapFor({ 'memory.max': '268435456\n' }, { DFE_NODE_HEAP_MAX_MIB: '96' })).toBe('--max-old-space-size=96 --max-semi-space-size=4');
    expect(heapFor({}, { DFE_NODE_HEAP_MAX_MIB: '96' })).toBe('--max-old-space-size=96');
  });
});
