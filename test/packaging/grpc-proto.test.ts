import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseRuntimeStage } from './dockerfile.js';

/**
 * The gRPC server loads KEDA's .proto at run time (src/shim/grpc/proto.ts), so the file
 * must ship: in the npm package (`files`, checked with the real `npm pack`) and in the image
 * (a COPY of the runtime stage into the app directory, next to dist/ where the loader looks).
 */
const REPO = resolve(import.meta.dirname, '..', '..');
const PROTO = 'proto/externalscaler.proto';

describe("KEDA's external scaler proto", () => {
  it('is in the npm package', () => {
    const pack = spawnSync('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], { cwd: REPO, encoding: 'utf8', timeout: 120_000 });
    expect(pack.status, pack.stderr).toBe(0);
    const [report] = JSON.parse(pack.stdout) as { files: { path: string }[] }[];
    expect(report?.files.map((f) => f.path)).toContain(PROTO);
  });

  it('is copied into the image next to dist/', () => {
    const stage = parseRuntimeStage(join(REPO, 'Dockerfile'));
    const copy = stage.steps.find((s) => s.kind === 'copy' && s.fromStage === undefined && s.sources.includes('proto'));
    expect(copy).toMatchObject({ destination: join(stage.workdir, 'proto') });
    expect(stage.steps.some((s) => s.kind === 'copy' && s.destination === join(stage.workdir, 'dist', 'src'))).toBe(true);
  });

  it("is KEDA's service, unmodified below our header", () => {
    const text = readFileSync(join(REPO, PROTO), 'utf8');
    expect(text).toMatch(/^\/\/ KEDA's external scaler protocol/);
    expect(text).toMatch(/Licensed under the Apache License, Version 2\.0/);
    for (const rpc of ['IsActive', 'StreamIsActive', 'GetMetricSpec', 'GetMetrics']) expect(text).toMatch(new RegExp(`rpc ${rpc}\\(`));
    expect(text).toMatch(/^package externalscaler;$/m);
  });
});
