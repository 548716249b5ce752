import { DfeError, showValue } from '../../errors.js';
import type { RawQueryString } from '../params.js';
import { HOLD_TEXT } from '../params.js';
import { isServable, MAX_SERVABLE } from '../value.js';

/**
 * A trigger's `scalerMetadata` read the way the HTTP URL is (docs/api.md#grpc):
 * `query` names the catalogue query, its declared params sit under their own
 * names, `hold` as on the URL; `targetValue` and `activationTargetValue` are
 * the trigger's target and activation threshold. Other keys (KEDA's own:
 * `scalerAddress`, `enableTLS`, …) are ignored, as undeclared URL params are.
 * Pure; a bad key is a PARAM_INVALID naming the key and the value.
 */
export interface ScalerMetadata {
  /** The catalogue query name. */
  readonly query: string;
  /** Everything, as a query string: declared params and `hold` are read from it by the serving path. */
  readonly raw: RawQueryString;
  /** The trigger's target, when given (GetMetricSpec requires it). */
  readonly targetValue: number | undefined;
  /** Active while value > this (default 0, as KEDA's own triggers). */
  readonly activationTargetValue: number;
}

function numberOf(key: string, text: string | undefined, positive: boolean): number | undefined {
  if (text === undefined) return undefined;
  const n = HOLD_TEXT.test(text) ? Number(text) : Number.NaN;
  if (isServable(n) && (!positive || n > 0)) return n;
  const range = positive ? `greater than 0 and at most ${MAX_SERVABLE}` : `from 0 to ${MAX_SERVABLE}`;
  throw new DfeError('PARAM_INVALID', `${key}=${showValue(text)} must be a number ${range}`, { key, value: text });
}

export function readMetadata(metadata: Readonly<Record<string, string>> | undefined): ScalerMetadata {
  const raw = metadata ?? {};
  const query = raw.query;
  if (query === undefined || query === '') {
    throw new DfeError('PARAM_INVALID', 'missing required metadata key query (the catalogue query name)', { key: 'query' });
  }
  return {
    query,
    raw,
    targetValue: numberOf('targetValue', raw.targetValue, true),
    activationTargetValue: numberOf('activationTargetValue', raw.activationTargetValue, false) ?? 0,
  };
}

/** GetMetricSpec's target: required there. */
export function requireTarget(metadata: ScalerMetadata): number {
  if (metadata.targetValue !== undefined) return metadata.targetValue;
  throw new DfeError('PARAM_INVALID', 'missing required metadata key targetValue (the trigger target)', { query: metadata.query, key: 'targetValue' });
}

/** Activation as KEDA's own triggers decide it: active while the value is above the threshold. */
export function isActive(value: number, activationTargetValue: number): boolean {
  return value > activationTargetValue;
}
