import { defineConfig } from 'vitest/config';

/**
 * The e2e lane (`npm run test:e2e`): a real kube-apiserver, kube-controller-manager (the HPA)
 * and KEDA built from source (.ci/install-control-plane.sh) scale Deployments on what the shim
 * answers (test/e2e/). Run alone, like the fleet lane: one file, one control plane, its
 * scenarios concurrent inside it. Files are `*.e2e.ts`, so the main run never picks them up.
 */
export default defineConfig({
  test: {
    include: ['test/e2e/**/*.e2e.ts'],
    globalSetup: ['./test/global-setup.ts'],
    pool: 'forks',
    maxWorkers: 1,
    testTimeout: 15 * 60_000,
    hookTimeout: 5 * 60_000,
    reporters: ['default', './test/helpers/summary-reporter.ts'],
  },
});
