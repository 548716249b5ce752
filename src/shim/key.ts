/**
 * The cache key of one answer (docs/failsafe.md#order-of-a-request): the query name plus its
 * DECLARED params, sorted by name. Undeclared request params (and the reserved
 * `hold` and `api_key`) never reach it, so they cannot split or grow the cache.
 */
export type DeclaredParams = Readonly<Record<string, string>>;

/**
 * Per declared-names list (a compiled query's own frozen array): the names
 * sorted once, and the whole key when the query has no params. Built on first
 * use, not per request; a WeakMap, so a reloaded catalogue's old arrays go.
 */
interface KeyShape {
  readonly sorted: readonly string[];
  /** Key of a param-less query, with the name it was built for. */
  constant?: { readonly name: string; readonly key: string };
}

const shapes = new WeakMap<readonly string[], KeyShape>();

function shapeOf(declared: readonly string[]): KeyShape {
  let shape = shapes.get(declared);
  if (shape === undefined) {
    shape = { sorted: [...declared].sort() };
    shapes.set(declared, shape);
  }
  return shape;
}

function build(queryName: string, sorted: readonly string[], params: DeclaredParams): string {
  const pairs = sorted.map((name) => [name, params[name] ?? ''] as const);
  // JSON keeps the encoding unambiguous whatever characters names or values hold.
  return JSON.stringify([queryName, pairs]);
}

export function cacheKey(queryName: string, declared: readonly string[], params: DeclaredParams): string {
  const shape = shapeOf(declared);
  if (shape.sorted.length > 0) return build(queryName, shape.sorted, params);
  if (shape.constant?.name !== queryName) shape.constant = { name: queryName, key: build(queryName, shape.sorted, params) };
  return shape.constant.key;
}
