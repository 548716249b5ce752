/**
 * Metric names out of PromQL, read with Prometheus' own grammar (@prometheus-io/lezer-promql,
 * the parser of the Prometheus UI) rather than a regular expression: every vector selector's
 * metric name, and whether the expression parses at all.
 */
import { parser } from '@prometheus-io/lezer-promql';

/** Grafana's variables, replaced by values of the same kind so the text is PromQL. */
const GRAFANA_DURATIONS: Readonly<Record<string, string>> = { $__rate_interval: '5m', $__interval: '1m', $__range: '1h' };

export function grafanaToPromql(expr: string): string {
  return expr.replace(/\$__(rate_interval|interval|range)\b/g, (name) => GRAFANA_DURATIONS[name] ?? name);
}

export interface ParsedExpr {
  readonly metrics: string[];
  /** Offsets of parse errors; empty for valid PromQL. */
  readonly errorsAt: number[];
}

export function parsePromql(expr: string): ParsedExpr {
  const text = grafanaToPromql(expr);
  const metrics = new Set<string>();
  const errorsAt: number[] = [];
  parser.parse(text).iterate({
    enter(node) {
      if (node.type.isError) errorsAt.push(node.from);
      if (node.name === 'VectorSelector') {
        const id = node.node.getChild('Identifier');
        if (id) metrics.add(text.slice(id.from, id.to));
      }
    },
  });
  return { metrics: [...metrics], errorsAt };
}
