import type { LoadCurve } from './model.js';

/** STUB: one row of block characters for the pressure curve. */
export function renderCurve(_curve: LoadCurve, width: number, _sharedMax?: number): string {
  return '▁'.repeat(Math.max(0, width));
}
