import { describe, expect, it } from 'vitest';
import { DISABLE_REASONS, knowHunts, zeroAutoDisabled } from '../../../src/runner/hunt-series.js';
import { createRunnerMetrics } from '../../../src/runner/metrics.js';

/**
 * issue 28 part 2: each known hunt's labelled series exist at 0 from the first scrape, and
 * loading another hunt set rebuilds them — new hunts get theirs, gone hunts lose theirs,
 * counts already made stay.
 */
const scrape = async (m: ReturnType<typeof createRunnerMetrics>) => m.registry.metrics();

describe('hunt-labelled series at 0', () => {
  it('every known hunt has its counters and its auto-disabled gauge at 0, per label value', async () => {
    const m = createRunnerMetrics();
    knowHunts(m, ['a', 'b']);
    const text = await scrape(m);
    for (const hunt of ['a', 'b']) {
      expect(text).toContain(`dfe_hunt_phase_shift_total{hunt_id="${hunt}"} 0`);
      expect(text).toContain(`dfe_hunt_runs_total{hunt_id="${hunt}",outcome="failed"} 0`);
      expect(text).toContain(`dfe_hunt_threshold_breach_total{hunt_id="${hunt}",resource="cpu"} 0`);
      for (const reason of DISABLE_REASONS) expect(text).toContain(`dfe_hunt_autodisabled{hunt_id="${hunt}",reason="${reason}"} 0`);
    }
    expect(text).toContain('dfe_hunt_load_cpu{stat="peak"} 0');
  });

  it('a new hunt set adds and removes series; counts of hunts that stay are kept', async () => {
    const m = createRunnerMetrics();
    knowHunts(m, ['a', 'b']);
    m.smoothing.phaseShifts.inc({ hunt_id: 'a' }, 2);
    m.smoothing.phaseOffset.set({ hunt_id: 'b' }, 40);
    knowHunts(m, ['a', 'c']);
    const text = await scrape(m);
    expect(text).toContain('dfe_hunt_phase_shift_total{hunt_id="a"} 2');
    expect(text).toContain('dfe_hunt_phase_shift_total{hunt_id="c"} 0');
    expect(text).not.toContain('hunt_id="b"');
  });

  it('after a refresh from hunt_state, hunts not disabled read 0 again and a disabled one keeps its 1', async () => {
    const m = createRunnerMetrics();
    knowHunts(m, ['a', 'b']);
    // What the escalation's refresh does: reset, then 1 for each disabled hunt.
    m.smoothing.autoDisabled.reset();
    m.smoothing.autoDisabled.set({ hunt_id: 'a', reason: 'mem_crashloop' }, 1);
    zeroAutoDisabled(m, new Set(['a']));
    const text = await scrape(m);
    expect(text).toContain('dfe_hunt_autodisabled{hunt_id="a",reason="mem_crashloop"} 1');
    expect(text).not.toContain('dfe_hunt_autodisabled{hunt_id="a",reason="ceiling_cpu"}');
    for (const reason of DISABLE_REASONS) expect(text).toContain(`dfe_hunt_autodisabled{hunt_id="b",reason="${reason}"} 0`);
  });
});
