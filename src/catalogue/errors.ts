import { DfeError, showValue } from '../errors.js';

/**
 * Every catalogue problem is one `DfeError('CATALOGUE_INVALID')` whose message
 * reads `<file>: query "<name>" key "<key>": <value> <problem>`, so an operator
 * can fix the ConfigMap from the log line alone.
 */
export interface CatalogueProblem {
  readonly file: string;
  readonly query?: string | undefined;
  readonly key?: string | undefined;
  /** Shown before the problem when present (`'value' in problem`, so `null` shows too). */
  readonly value?: unknown;
  readonly problem: string;
}

export function catalogueInvalid(p: CatalogueProblem, cause?: unknown): DfeError {
  const where = [p.query === undefined ? undefined : `query ${JSON.stringify(p.query)}`, p.key === undefined ? undefined : `key ${JSON.stringify(p.key)}`]
    .filter((part) => part !== undefined)
    .join(' ');
  const shown = 'value' in p ? `${show(p.value)} ` : '';
  const message = `${p.file}: ${where === '' ? '' : `${where}: `}${shown}${p.problem}`;
  return new DfeError('CATALOGUE_INVALID', message, {
    file: p.file,
    ...(p.query === undefined ? {} : { query: p.query }),
    ...(p.key === undefined ? {} : { key: p.key }),
    ...('value' in p ? { value: p.value } : {}),
    ...(cause === undefined ? {} : { cause }),
  });
}

/** showValue, except that JSON would print `.inf` and `.nan` as null. */
function show(value: unknown): string {
  return typeof value === 'number' && !Number.isFinite(value) ? String(value) : showValue(value);
}
