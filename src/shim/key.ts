/**
 * The cache key of one answer (docs/failsafe.md#order-of-a-request): the query name plus its
 * DECLARED params, sorted by name. Undeclared request params (and the reserved
 * `hold` and `api_key`) never reach it, so they cannot split or grow the cache.
 */
export type DeclaredParams = Readonly<Record<string, string>>;

/**
 * Per declared-names list (a compiled query's own frozen array): the names
 * sorted and quoted once, the key's opening for the query name, and the whole
 * key when the query has no params. Built on first use, not per request; a
 * WeakMap, so a reloaded catalogue's old arrays go.
 */
interface KeyShape {
  readonly sorted: readonly string[];
  /** JSON of each sorted name. */
  readonly quoted: readonly string[];
  /** `[<name as JSON>,[` for the query name it was built for. */
  opening?: { readonly name: string; readonly text: string };
  /** Key of a param-less query, with the name it was built for. */
  constant?: { readonly name: string; readonly key: string };
}

const shapes = new WeakMap<readonly string[], KeyShape>();

function shapeOf(declared: readonly string[]): KeyShape {
  let shape = shapes.get(declared);
  if (shape === undefined) {
    const sorted = [...declared].sort();
    shape = { sorted, quoted: sorted.map((name) => JSON.stringify(name)) };
    shapes.set(declared, shape);
  }
  return shape;
}

/**
 * The text of `JSON.stringify([queryName, [[name, value], …]])` (JSON keeps
 * the encoding unambiguous whatever characters names or values hold), written
 * without building the arrays: KEDA's pressure polls make one per request.
 */
function build(queryName: string, shape: KeyShape, params: DeclaredParams): string {
  if (shape.opening?.name !== queryName) shape.opening = { name: queryName, text: `[${JSON.stringify(queryName)},[` };
  let text = shape.opening.text;
  for (let i = 0; i < shape.sorted.length; i++) {
    text += `${i === 0 ? '[' : ',['}${shape.quoted[i]},${JSON.stringify(params[shape.sorted[i] as string] ?? '')}]`;
  }
  return `${text}]]`;
}

export function cacheKey(queryName: string, declared: readonly string[], params: DeclaredParams): string {
  const shape = shapeOf(declared);
  if (shape.sorted.length > 0) return build(queryName, shape, params);
  if (shape.constant?.name !== queryName) shape.constant = { name: queryName, key: build(queryName, shape, params) };
  return shape.constant.key;
}
