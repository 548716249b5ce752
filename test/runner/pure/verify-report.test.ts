import { describe, expect, it } from 'vitest';
import { formatVerifyReport, type VerifyReport } from '../../../src/runner/verify-report.js';

/** The printed report of verify-coordination (docs/operations.md#verify-coordination). */
const report = (latestFires: VerifyReport['latestFires']): VerifyReport => ({
  database: 'dfe_verify_x',
  target: 'embedded:/tmp/x',
  claims: 'keeper',
  runners: 3,
  processes: false,
  hunts: 2,
  seconds: 15,
  startNow: 1000,
  endNow: 1015,
  pollSeconds: 0.5,
  leaseSeconds: 30,
  cap: 8,
  coverage: { owed: 2, ownRun: 2, missed: 0, unrun: 0, doubled: 0, overlaps: 0, examples: [] },
  doubleRunRows: 0,
  runs: { succeeded: 2, failed: 0 },
  lateness: { p50: 0.4, p99: 1.2, max: 1.2 },
  latestFires,
  overlapping: [],
  longestRunSeconds: 0.02,
  unexpectedExits: [],
  kept: false,
  ok: true,
});

describe('formatVerifyReport', () => {
  it('names each latest fire by its signed offset from the race start: a fire owed just before the start reads -1 s, not +-1 s', () => {
    const text = formatVerifyReport(report([
      { huntId: 'v011', fire: 999, runStart: 1000.2, seconds: 1.2 },
      { huntId: 'v006', fire: 1012, runStart: 1013.5, seconds: 1.5 },
    ]));
    expect(text).toContain('latest fires: v011@-1 s run at +0.2 s (1.20 s), v006@+12 s run at +13.5 s (1.50 s)');
    expect(text).not.toContain('+-');
  });

  it('leaves the line out when no fire ran', () => {
    expect(formatVerifyReport(report([]))).not.toContain('latest fires');
  });

  it('names the lease log and its rows only when one was kept', () => {
    expect(formatVerifyReport({ ...report([]), leaseLogRows: 42 })).toContain('lease log: 42 row(s) in dfe_verify_x.verify_lease_log');
    expect(formatVerifyReport(report([]))).not.toContain('lease log');
  });
});
