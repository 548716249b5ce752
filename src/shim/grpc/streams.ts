import { status, type ServerWritableStream } from '@grpc/grpc-js';
import type { Logger } from '../../log.js';
import { cacheKey } from '../key.js';
import { answerRequest, resolveRequest, type ServingContext } from '../serve.js';
import { isActive, type ScalerMetadata } from './metadata.js';
import type { GrpcMetrics } from './metrics.js';
import type { IsActiveResponse, ScaledObjectRef } from './proto.js';
import { grpcErrorOf } from './status.js';

/**
 * StreamIsActive (docs/api.md#streamisactive): every open stream shares ONE
 * check loop. Streams are grouped by their query and declared params (the
 * cache key), and each check asks the serving path once per group, however
 * many streams it holds — the same cache and single-flight as HTTP. A stream
 * is sent its first known state, then only changes. A failing ClickHouse
 * (any answer that is not fresh) sends nothing: the last known state stands.
 * The loop runs only while streams are open.
 */
const CANCELLED = status.CANCELLED;

export type ActivityCall = ServerWritableStream<ScaledObjectRef, IsActiveResponse>;

interface Subscriber {
  readonly call: ActivityCall;
  readonly activation: number;
  /** What this stream was last sent. */
  sent: boolean | undefined;
}

interface Group {
  readonly key: string;
  readonly metadata: ScalerMetadata;
  readonly subscribers: Set<Subscriber>;
  /** The last fresh value, sent to a stream that joins. */
  value: number | undefined;
  checking: boolean;
}

export interface StreamHubOptions {
  readonly ctx: ServingContext;
  readonly intervalMs: number;
  readonly metrics: GrpcMetrics;
  readonly logger: Logger;
  /** A stream ended by the shim (close, or metadata a reload made invalid): counted once. */
  readonly onEnd: (code: number) => void;
}

export class StreamHub {
  private readonly groups = new Map<string, Group>();
  private timer: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(private readonly options: StreamHubOptions) {}

  /** Open streams (the gauge). */
  get size(): number {
    let n = 0;
    for (const group of this.groups.values()) n += group.subscribers.size;
    return n;
  }

  get groupCount(): number {
    return this.groups.size;
  }

  /** Adds a stream whose metadata already validated; a new group is checked at once. */
  open(call: ActivityCall, metadata: ScalerMetadata): void {
    const resolved = resolveRequest(this.options.ctx, metadata.query, metadata.raw);
    // Gone before it was registered: its 'cancelled' event has passed already.
    if (call.cancelled) return;
    if (this.closed) {
      // Shutting down: end it as close() ended the others; KEDA reconnects to another pod.
      call.end();
      this.options.onEnd(status.OK);
      return;
    }
    const key = cacheKey(resolved.query.name, resolved.query.params, resolved.params);
    let group = this.groups.get(key);
    const fresh = group === undefined;
    if (group === undefined) {
      group = { key, metadata, subscribers: new Set(), value: undefined, checking: false };
      this.groups.set(key, group);
    }
    const subscriber: Subscriber = { call, activation: metadata.activationTargetValue, sent: undefined };
    group.subscribers.add(subscriber);
    this.options.metrics.openStreams.inc();
    const owner = group;
    // A client that goes away (cancel, reset, keepalive timeout) frees its place.
    const gone = () => {
      if (this.drop(owner, subscriber)) this.options.onEnd(CANCELLED);
    };
    call.once('cancelled', gone);
    call.once('error', gone);
    if (group.value !== undefined) this.send(subscriber, group.value);
    if (fresh) void this.check(group);
    this.schedule();
  }

  /** Ends every stream with OK (KEDA reconnects) and stops the loop. */
  close(): void {
    this.closed = true;
    clearTimeout(this.timer);
    this.timer = undefined;
    for (const group of this.groups.values()) {
      for (const subscriber of group.subscribers) {
        this.drop(group, subscriber);
        subscriber.call.end();
        this.options.onEnd(status.OK);
      }
    }
  }

  /** Whether the stream was still open. */
  private drop(group: Group, subscriber: Subscriber): boolean {
    if (!group.subscribers.delete(subscriber)) return false;
    this.options.metrics.openStreams.dec();
    if (group.subscribers.size === 0 && this.groups.get(group.key) === group) this.groups.delete(group.key);
    if (this.groups.size === 0) {
      clearTimeout(this.timer);
      this.timer = undefined;
    }
    return true;
  }

  private schedule(): void {
    if (this.timer !== undefined || this.closed || this.groups.size === 0) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.tick();
    }, this.options.intervalMs);
  }

  private tick(): void {
    // A group still waiting on its last check (ClickHouse slow) is not asked twice.
    for (const group of this.groups.values()) if (!group.checking) void this.check(group);
    this.schedule();
  }

  private async check(group: Group): Promise<void> {
    const { ctx, metrics } = this.options;
    group.checking = true;
    try {
      // Resolved each time: a reload may have changed or removed the query.
      const request = resolveRequest(ctx, group.metadata.query, group.metadata.raw);
      const answer = await answerRequest(ctx, request);
      if (answer.source !== 'fresh') {
        metrics.streamChecks.inc({ outcome: 'held' });
        return;
      }
      metrics.streamChecks.inc({ outcome: 'fresh' });
      group.value = answer.value;
      for (const subscriber of group.subscribers) this.send(subscriber, answer.value);
    } catch (err) {
      metrics.streamChecks.inc({ outcome: 'rejected' });
      this.reject(group, err);
    } finally {
      group.checking = false;
    }
  }

  private send(subscriber: Subscriber, value: number): void {
    const active = isActive(value, subscriber.activation);
    if (active === subscriber.sent) return;
    subscriber.sent = active;
    subscriber.call.write({ result: active });
    this.options.metrics.streamMessages.inc();
  }

  /** The group's metadata no longer validates (a reload): its streams end with the error a new call would get. */
  private reject(group: Group, err: unknown): void {
    const error = grpcErrorOf(err);
    this.options.logger.warn({ query: group.metadata.query, error: error.details }, 'StreamIsActive streams ended: their metadata no longer validates');
    for (const subscriber of [...group.subscribers]) {
      this.drop(group, subscriber);
      subscriber.call.emit('error', error);
      this.options.onEnd(error.code);
    }
  }
}
