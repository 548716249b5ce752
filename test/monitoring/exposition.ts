/**
 * The sample names a Prometheus text exposition can have, from its `# TYPE` lines: a counter
 * or gauge family is its own sample name, a histogram `x` has x_bucket, x_sum and x_count, a
 * summary x, x_sum and x_count. A labelled family that has seen no sample yet prints only its
 * HELP and TYPE, and still exists: a panel on it shows data as soon as there is some.
 */
export function exportedSampleNames(exposition: string): Set<string> {
  const names = new Set<string>();
  for (const [, name, type] of exposition.matchAll(/^# TYPE (\S+) (\S+)$/gm)) {
    if (!name) continue;
    if (type === 'histogram') for (const suffix of ['_bucket', '_sum', '_count']) names.add(`${name}${suffix}`);
    else if (type === 'summary') for (const suffix of ['', '_sum', '_count']) names.add(`${name}${suffix}`);
    else names.add(name);
  }
  return names;
}
