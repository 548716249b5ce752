import type { LoadCurve } from './model.js';

/**
 * The load curve as one row of block characters (docs/smoothing.md "Reading the picture").
 * Each column shows the HIGHEST bucket it stands for, so a peak never hides between columns;
 * pass the same `scaleMax` for a before and an after row so their heights compare.
 */
const BLOCKS = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'] as const;

export function renderCurve(curve: LoadCurve, width: number, scaleMax?: number): string {
  const values = curve.pressure;
  const columns = Math.max(1, Math.floor(width));
  const max = scaleMax ?? curve.peak;
  if (values.length === 0) return ' '.repeat(columns);
  let row = '';
  for (let col = 0; col < columns; col++) {
    const from = Math.floor((col * values.length) / columns);
    const to = Math.max(from + 1, Math.floor(((col + 1) * values.length) / columns));
    let v = 0;
    for (let b = from; b < to && b < values.length; b++) v = Math.max(v, values[b] ?? 0);
    row += v <= 0 || max <= 0 ? ' ' : BLOCKS[Math.min(BLOCKS.length - 1, Math.max(0, Math.ceil((v / max) * BLOCKS.length) - 1))];
  }
  return row;
}
