import type { ClickHouseClient } from '@clickhouse/client';
import { randomInt } from 'node:crypto';
import { qualifiedTable } from '../clickhouse/identifiers.js';

/**
 * Synthetic data for the demo and the example hunts in examples/hunts/: an
 * `events` table of login/SSH events, a `detections` table the hunts INSERT
 * into, and a feeder that writes a few events per second, with an attacker that
 * now and then hammers SSH or sprays passwords so the hunts find something.
 * The example hunts name the default data database `dfe`.
 */
export function demoTablesDdl(database: string): string[] {
  return [
    `CREATE TABLE IF NOT EXISTS ${qualifiedTable(database, 'events')} (
      _timestamp_load DateTime64(3) DEFAULT now64(3),
      event_time DateTime64(3),
      event_type LowCardinality(String),
      outcome LowCardinality(String),
      user String,
      src_ip String,
      host LowCardinality(String)
    ) ENGINE = MergeTree ORDER BY _timestamp_load TTL toDateTime(_timestamp_load) + INTERVAL 1 DAY`,
    `CREATE TABLE IF NOT EXISTS ${qualifiedTable(database, 'detections')} (
      detected_at DateTime64(3) DEFAULT now64(3),
      hunt_id LowCardinality(String),
      window_start DateTime64(3),
      window_end DateTime64(3),
      entity String,
      hits UInt64,
      details String
    ) ENGINE = MergeTree ORDER BY (hunt_id, detected_at)
    SETTINGS non_replicated_deduplication_window = 1000`,
    // A data directory from before the setting: its table gets it too (docs/hunts.md#output-tables).
    `ALTER TABLE ${qualifiedTable(database, 'detections')} MODIFY SETTING non_replicated_deduplication_window = 1000`,
  ];
}

export async function createDemoTables(client: ClickHouseClient, database: string): Promise<void> {
  for (const query of demoTablesDdl(database)) await client.command({ query });
}

export interface DemoEvent {
  /** ISO-8601 with milliseconds. */
  readonly event_time: string;
  readonly event_type: 'ssh_auth' | 'login' | 'admin_login';
  readonly outcome: 'success' | 'failure';
  readonly user: string;
  readonly src_ip: string;
  readonly host: string;
}

const USERS = ['alice', 'bob', 'carol', 'dave', 'erin', 'frank', 'grace', 'root', 'admin'];
const HOSTS = ['web-1', 'web-2', 'db-1', 'bastion'];
const pick = <T>(items: readonly T[]): T => items[randomInt(items.length)] as T;
const officeIp = () => `10.0.${randomInt(4)}.${randomInt(1, 250)}`;

/** One second of traffic: ordinary users, plus an attack burst about one second in ten. */
export function syntheticEvents(nowMs: number, perSecond: number): DemoEvent[] {
  const events: DemoEvent[] = [];
  const at = (offsetMs: number) => new Date(nowMs + offsetMs).toISOString();
  for (let i = 0; i < perSecond; i += 1) {
    const type = pick(['ssh_auth', 'login', 'login', 'admin_login'] as const);
    events.push({
      event_time: at(randomInt(1000)),
      event_type: type,
      outcome: randomInt(10) === 0 ? 'failure' : 'success',
      user: pick(USERS),
      src_ip: officeIp(),
      host: pick(HOSTS),
    });
  }
  if (randomInt(10) === 0) {
    const attacker = `203.0.113.${randomInt(1, 250)}`;
    const spray = randomInt(2) === 0;
    for (let i = 0; i < 15; i += 1) {
      events.push({
        event_time: at(randomInt(1000)),
        event_type: spray ? 'login' : 'ssh_auth',
        outcome: 'failure',
        user: spray ? (USERS[i % USERS.length] as string) : 'root',
        src_ip: attacker,
        host: spray ? 'web-1' : 'bastion',
      });
    }
  }
  return events;
}

/**
 * The last `minutes` of traffic as if the feeder had been running: ordinary events plus an SSH
 * brute-force burst every 10 s, each row's `_timestamp_load` set in the past. A hunt's first
 * run covers the interval before its latest fire, which predates the demo's start; without
 * this history it would find nothing and the first detection would wait a whole interval.
 */
export function recentHistory(nowMs: number, minutes = 2): (DemoEvent & { readonly _timestamp_load: string })[] {
  const rows: (DemoEvent & { readonly _timestamp_load: string })[] = [];
  for (let secondsAgo = minutes * 60; secondsAgo >= 1; secondsAgo -= 1) {
    const atMs = nowMs - secondsAgo * 1000;
    const second = syntheticEvents(atMs, 5);
    if (secondsAgo % 10 === 0) {
      const attacker = `203.0.113.${randomInt(1, 250)}`;
      for (let i = 0; i < 12; i += 1) {
        second.push({ event_time: new Date(atMs + i).toISOString(), event_type: 'ssh_auth', outcome: 'failure', user: 'root', src_ip: attacker, host: 'bastion' });
      }
    }
    for (const event of second) rows.push({ ...event, _timestamp_load: event.event_time });
  }
  return rows;
}

export async function seedRecentHistory(client: ClickHouseClient, database: string, nowMs: number): Promise<number> {
  const values = recentHistory(nowMs);
  await client.insert({
    table: qualifiedTable(database, 'events'),
    values,
    format: 'JSONEachRow',
    clickhouse_settings: { date_time_input_format: 'best_effort' },
  });
  return values.length;
}

export interface EventFeeder {
  stop(): Promise<void>;
}

/** Inserts `perSecond` synthetic events every second until stopped; a failed insert is skipped. */
export function startEventFeeder(
  client: ClickHouseClient,
  database: string,
  options: { readonly perSecond?: number; readonly onError?: (err: unknown) => void } = {},
): EventFeeder {
  const table = qualifiedTable(database, 'events');
  let inFlight: Promise<void> = Promise.resolve();
  const feed = () => {
    inFlight = client
      .insert({
        table,
        values: syntheticEvents(Date.now(), options.perSecond ?? 5),
        format: 'JSONEachRow',
        clickhouse_settings: { date_time_input_format: 'best_effort' },
      })
      .then(() => undefined, (err: unknown) => options.onError?.(err));
  };
  feed();
  const timer = setInterval(feed, 1000);
  return {
    async stop() {
      clearInterval(timer);
      await inFlight;
    },
  };
}
