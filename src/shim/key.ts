/**
 * The cache key of one answer (docs/failsafe.md#order-of-a-request): the query name plus its DECLARED
 * params, sorted by name. Undeclared request params (and the reserved `hold`
 * and `api_key`) never reach it, so they cannot split or grow the cache.
 */
export type DeclaredParams = Readonly<Record<string, string>>;

export function cacheKey(queryName: string, declared: readonly string[], params: DeclaredParams): string {
  const pairs = [...declared].sort().map((name) => [name, params[name] ?? ''] as const);
  // JSON keeps the encoding unambiguous whatever characters names or values hold.
  return JSON.stringify([queryName, pairs]);
}
