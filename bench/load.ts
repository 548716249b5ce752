import autocannon from 'autocannon';

/**
 * autocannon on loopback, bounded in time, in a worker thread so the load
 * generator does not share the event loop of the server it measures.
 */
export interface LoadResult {
  readonly requests: number;
  readonly rps: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly maxMs: number;
  readonly non2xx: number;
  readonly errors: number;
}

export interface LoadOptions {
  readonly connections: number;
  readonly durationSeconds: number;
  /** Default 1: one worker thread fires the requests. 0 runs autocannon on this thread. */
  readonly workers?: number;
}

export async function runLoad(url: string, options: LoadOptions): Promise<LoadResult> {
  if (!/^http:\/\/(127\.\d+\.\d+\.\d+|localhost|\[::1\])[:/]/.test(url)) throw new Error(`bench targets loopback only, not ${url}`);
  const workers = options.workers ?? 1;
  const result = await autocannon({
    url,
    connections: options.connections,
    duration: options.durationSeconds,
    timeout: 10,
    ...(workers > 0 ? { workers } : {}),
  });
  return {
    requests: result.requests.total,
    rps: result.requests.average,
    p50Ms: result.latency.p50,
    p99Ms: result.latency.p99,
    maxMs: result.latency.max,
    non2xx: result.non2xx,
    errors: result.errors,
  };
}
