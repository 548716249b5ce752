import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkOutputDedup, dedupFix, dedupVerdict, warnOutputDedup, type OutputDedupFinding } from '../../src/coordination/output-dedup.js';
import { compileHuntFile, type HuntSpec } from '../../src/schedule/hunt-spec.js';
import { materialise, warnMaterialise } from '../../src/coordination/materialise.js';
import { applySchema } from '../../src/coordination/topology.js';
import { capturingLogger } from '../helpers/logger.js';
import { openKeeperDatabase } from '../helpers/keeper.js';
import type { TestDatabase } from '../helpers/clickhouse.js';

/**
 * The output-table deduplication check (docs/claim-protocol.md) on the embedded engine, with the
 * shipped testkeeper config so a ReplicatedMergeTree table can be made in-process.
 */
let db: TestDatabase;

function hunt(huntId: string, table: string): HuntSpec {
  const yaml = `schedule: {mode: rate, interval: 60}\nqueries:\n  - "INSERT INTO ${table} SELECT 1"\n`;
  const result = compileHuntFile(`${huntId}.yaml`, yaml, 0.5);
  if (result.kind !== 'hunt') throw new Error(`fixture hunt ${huntId} did not compile: ${JSON.stringify(result)}`);
  return result.spec;
}

beforeAll(async () => {
  db = await openKeeperDatabase('dedup');
  const d = `\`${db.database}\``;
  for (const query of [
    `CREATE TABLE ${d}.plain (x UInt8) ENGINE = MergeTree ORDER BY x`,
    `CREATE TABLE ${d}.windowed (x UInt8) ENGINE = MergeTree ORDER BY x SETTINGS non_replicated_deduplication_window = 100`,
    `CREATE TABLE ${d}.replicated (x UInt8) ENGINE = ReplicatedMergeTree('/dfe-test/${db.database}/replicated', 'r1') ORDER BY x`,
    `CREATE TABLE ${d}.memory (x UInt8) ENGINE = Memory`,
    `CREATE TABLE ${d}.log (x UInt8) ENGINE = Log`,
  ]) {
    await db.handle.client.command({ query });
  }
}, 60_000);

afterAll(async () => {
  await db?.close();
});

describe('whether a hunt output table deduplicates a repeated insert', () => {
  it('reads each engine and its settings from system.tables', async () => {
    const hunts = ['plain', 'windowed', 'replicated', 'memory', 'log', 'absent'].map((t) => hunt(`h_${t}`, `${db.database}.${t}`));
    const findings = await checkOutputDedup(db.handle.client, hunts);
    const kinds = Object.fromEntries(findings.map((f) => [f.table.split('.')[1], [f.engine, f.verdict.kind]]));
    expect(kinds).toEqual({
      plain: ['MergeTree', 'not-deduplicated'],
      windowed: ['MergeTree', 'deduplicated'],
      replicated: ['ReplicatedMergeTree', 'deduplicated'],
      memory: ['Memory', 'not-deduplicated'],
      log: ['Log', 'not-deduplicated'],
      absent: [undefined, 'missing'],
    });
    expect(findings.map((f) => f.huntId)).toEqual(hunts.map((h) => h.huntId));
  });

  it('the fix it names makes a plain MergeTree table deduplicate', async () => {
    const [finding] = await checkOutputDedup(db.handle.client, [hunt('h_fix', `${db.database}.plain`)]);
    const fix = dedupFix(finding as OutputDedupFinding);
    expect(fix).toBe(`ALTER TABLE ${db.database}.plain MODIFY SETTING non_replicated_deduplication_window = 1000`);
    await db.handle.client.command({ query: fix });
    const [after] = await checkOutputDedup(db.handle.client, [hunt('h_fix', `${db.database}.plain`)]);
    expect(after?.verdict).toEqual({ kind: 'deduplicated', how: 'MergeTree: non_replicated_deduplication_window = 1000' });
    await db.handle.client.command({ query: `ALTER TABLE \`${db.database}\`.plain MODIFY SETTING non_replicated_deduplication_window = 0` });
  });

  it('materialise warns once per hunt and table that lacks it, naming both, the engine and the fix', async () => {
    const hunts = [hunt('h_one', `${db.database}.memory`), hunt('h_two', `${db.database}.windowed`)];
    const { logger, lines } = capturingLogger();
    warnOutputDedup(logger, await checkOutputDedup(db.handle.client, hunts));
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ level: 40, hunt_id: 'h_one', table: `${db.database}.memory`, engine: 'Memory' });
    expect(String(lines[0]?.msg)).toContain(`hunt h_one writes ${db.database}.memory: Memory never deduplicates inserts`);
    expect(String(lines[0]?.fix)).toContain('non_replicated_deduplication_window');
  });
});

describe('materialise', () => {
  it('returns the findings with the plan and logs one warning per hunt and table without deduplication', async () => {
    await applySchema(db.handle.client, db.database, { kind: 'single' });
    const hunts = [hunt('m_memory', `${db.database}.memory`), hunt('m_windowed', `${db.database}.windowed`), hunt('m_log', `${db.database}.log`)];
    const result = await materialise(db.handle.client, db.database, hunts, { read: {}, write: {} });
    expect(result.added).toBe(3);
    expect(result.outputDedup.map((f) => [f.huntId, f.verdict.kind])).toEqual([
      ['m_memory', 'not-deduplicated'],
      ['m_windowed', 'deduplicated'],
      ['m_log', 'not-deduplicated'],
    ]);
    const { logger, lines } = capturingLogger();
    warnMaterialise(logger, result);
    expect(lines.map((l) => [l.hunt_id, l.table, l.engine])).toEqual([
      ['m_memory', `${db.database}.memory`, 'Memory'],
      ['m_log', `${db.database}.log`, 'Log'],
    ]);
  }, 60_000);
});

describe('the verdict of an engine (pure)', () => {
  const defaults = { replicatedWindow: 100, nonReplicatedWindow: 0 };
  it('follows the server defaults where the table sets nothing', () => {
    expect(dedupVerdict('MergeTree', 'MergeTree ORDER BY x', { ...defaults, nonReplicatedWindow: 10 }).kind).toBe('deduplicated');
    expect(dedupVerdict('ReplicatedReplacingMergeTree', 'ReplicatedReplacingMergeTree(…) ORDER BY x', { ...defaults, replicatedWindow: 0 }).kind).toBe(
      'not-deduplicated',
    );
    expect(dedupVerdict('SharedMergeTree', 'SharedMergeTree ORDER BY x', defaults).kind).toBe('deduplicated');
    expect(dedupVerdict('Distributed', "Distributed('c', 'd', 't')", defaults).kind).toBe('unknown');
  });
});
