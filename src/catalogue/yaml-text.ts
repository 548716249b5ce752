import type * as YamlModule from 'yaml';

/**
 * YAML text → a plain value, the only CPU-heavy step of a catalogue load.
 * It runs in a worker thread (see off-thread.ts), so it must be
 * SELF-CONTAINED: it uses nothing but its arguments (its source text is what
 * the worker runs). It is also called in-thread by the synchronous
 * parseCatalogueText (tests, tools).
 *
 * Costs are bounded before they are paid (docs/catalogue.md, "Limits"):
 * - the library's own duplicate-key check (`uniqueKeys`) compares every key
 *   with every other key of a map, quadratic: 20 000 keys take seconds. It is
 *   off, and duplicates are found here with one Set per map, linear;
 * - the number of queries is counted on the syntax tree, before the tree is
 *   turned into objects;
 * - aliases are capped by the library (maxAliasCount, default 100), so an
 *   alias bomb is an error, not a heap.
 */
export type YamlOutcome =
  | { readonly ok: true; readonly value: unknown }
  | { readonly ok: false; readonly problem: string; readonly key?: string };

export function readYamlText(YAML: typeof YamlModule, text: string, maxQueries: number): YamlOutcome {
  const lineCounter = new YAML.LineCounter();
  const doc = YAML.parseDocument(text, { uniqueKeys: false, prettyErrors: true, lineCounter, logLevel: 'error' });
  const firstError = doc.errors[0];
  if (firstError !== undefined) {
    const line = (firstError.message.split('\n')[0] ?? '').replace(/:\s*$/, '');
    return { ok: false, problem: `is not valid YAML: ${line}` };
  }
  const root = doc.contents;
  const queries = YAML.isMap(root) ? root.get('queries', true) : undefined;
  if (YAML.isMap(queries) && queries.items.length > maxQueries) {
    return {
      ok: false,
      key: 'queries',
      problem: `defines ${queries.items.length} queries, more than the limit of ${maxQueries} (DFE_KEDA_SHIM_MAX_QUERIES)`,
    };
  }
  let duplicate: string | undefined;
  YAML.visit(doc, {
    Map(_key, node) {
      const seen = new Set<unknown>();
      for (const pair of node.items) {
        // Scalars compare by value (as the library's own check does); other keys by identity.
        const id = YAML.isScalar(pair.key) ? pair.key.value : pair.key;
        if (seen.has(id)) {
          const offset = YAML.isNode(pair.key) && pair.key.range ? pair.key.range[0] : 0;
          const at = lineCounter.linePos(offset);
          duplicate = `is not valid YAML: Map keys must be unique at line ${at.line}, column ${at.col} (${JSON.stringify(String(id)).slice(0, 80)})`;
          return YAML.visit.BREAK;
        }
        seen.add(id);
      }
      return undefined;
    },
  });
  if (duplicate !== undefined) return { ok: false, problem: duplicate };
  try {
    return { ok: true, value: doc.toJS() };
  } catch (err) {
    // e.g. "Excessive alias count indicates a resource exhaustion attack".
    return { ok: false, problem: `is not valid YAML: ${err instanceof Error ? err.message.split('\n')[0] : String(err)}` };
  }
}
