import { capturingLogger } from '../helpers/logger.js';
import { afterEach, describe, expect, it } from 'vitest';
import { cronMinGapSeconds, parseInterval } from '../../src/schedule/interval.js';
import { loadHuntsDir, logHuntSet } from '../../src/schedule/hunt-files.js';
import { compileHuntFile } from '../../src/schedule/hunt-spec.js';
import { compileStatement, runWindow, windowParams } from '../../src/schedule/window.js';
import { tempHuntsDir } from '../helpers/runner-fixtures.js';

/** docs/hunts.md: hunt definitions, parsed and validated without a server. */

describe('intervals', () => {
  it.each([
    [90, 90],
    ['300', 300],
    ['90s', 90],
    ['5m', 300],
    ['1h30m', 5400],
    ['1d', 86400],
    ['2d12h', 216000],
  ])('%j is %i seconds', (raw, seconds) => {
    expect(parseInterval(raw)).toMatchObject({ seconds });
  });

  it.each([0, -5, 1.5, '', '5x', 'm5', '5m1h', '0s', true, null])('rejects %j with a reason', (raw) => {
    expect(parseInterval(raw)).toMatchObject({ kind: 'invalid' });
  });

  it('turns a cron into the minimum gap between consecutive fires', () => {
    expect(cronMinGapSeconds('*/15 * * * *')).toBe(900);
    expect(cronMinGapSeconds('0 * * * *')).toBe(3600);
    // Irregular: 09:00, 09:10, 12:00 daily → the shortest gap wins.
    expect(cronMinGapSeconds('0,10 9 * * *')).toBe(600);
    expect(cronMinGapSeconds('0 9-17 * * 1-5')).toBe(3600);
    expect(parseInterval('*/5 * * * *')).toEqual({ kind: 'cron', seconds: 300, expression: '*/5 * * * *' });
  });

  it('rejects a cron that does not parse or fires fewer than twice', () => {
    expect(parseInterval('61 * * * *')).toMatchObject({ kind: 'invalid' });
    expect(parseInterval('0 0 30 2 *')).toMatchObject({ kind: 'invalid' });
  });
});

describe('statements', () => {
  it('renders {window} over the quoted column with bound bounds', () => {
    const st = compileStatement('SELECT 1 FROM t WHERE {window} AND x = 1', '_timestamp_load');
    expect(st.query).toBe(
      'SELECT 1 FROM t WHERE (`_timestamp_load` >= toDateTime64({window_start:Int64}, 3) AND `_timestamp_load` < toDateTime64({window_end:Int64}, 3)) AND x = 1',
    );
    expect(st.params).toEqual(['window_start', 'window_end']);
    expect(windowParams(st, runWindow(1000, 940, 60))).toEqual({ window_start: 940, window_end: 1000 });
    expect(runWindow(1000, null, 60)).toEqual({ startSeconds: 940, endSeconds: 1000 });
  });

  it('binds only the params a statement uses', () => {
    expect(compileStatement('SELECT {window_end:Int64}', undefined).params).toEqual(['window_end']);
    expect(compileStatement('SELECT map(\'a\', 1)', undefined).params).toEqual([]);
  });

  it.each([
    ['SELECT {window}', undefined, /no window_column/],
    ['SELECT {window}', 'bad col', /not a valid column name/],
    ['SELECT {user:String}', undefined, /only \{window_start:Int64\}/],
    ['SELECT {window_start:DateTime}', undefined, /write \{window_start:Int64\}/],
  ])('rejects %j (column %j)', (sql, column, reason) => {
    expect(() => compileStatement(sql, column)).toThrow(reason);
  });
});

describe('hunt files', () => {
  const good = 'schedule: {mode: rate, interval: 5m}\nqueries:\n  - SELECT 1\n';

  it('compiles a file: id = file stem, offset from §7.1', () => {
    const result = compileHuntFile('/h/brute-force-ssh.yaml', good, 0.8);
    expect(result).toMatchObject({ kind: 'hunt', spec: { huntId: 'brute-force-ssh', intervalSeconds: 300, phaseOffset: 216 } });
  });

  it.each([
    ['schedule: [', 'yaml', /not valid YAML/],
    ['queries: [SELECT 1]\n', 'schedule', /./],
    ['schedule: {mode: rate}\nqueries: [SELECT 1]\n', 'schedule.interval', /required/],
    ['schedule: {mode: rate, interval: 5x}\nqueries: [SELECT 1]\n', 'schedule.interval', /"5x" must be seconds/],
    ['schedule: {mode: rate, interval: 5m}\nqueries: []\n', 'queries', /at least one/],
    [`${good}colour: blue\n`, '', /colour/],
    [`${good}window_column: "a;b"\n`, 'window_column', /not a valid column name/],
    [`${good}settings: {log_comment: x}\n`, 'settings.log_comment', /set by the runner/],
    ['schedule: {mode: rate, interval: 1m}\nqueries: ["SELECT {window}"]\n', 'queries.0', /no window_column/],
    [`${good}ceilings: 5\n`, 'ceilings', /5 must be a map of memory_bytes, cpu_us, duration_ms/],
    [`${good}ceilings: {memory: 1}\n`, 'ceilings.memory', /is not a ceiling/],
    [`${good}ceilings: {duration_ms: 0}\n`, 'ceilings.duration_ms', /0 must be a whole number ≥ 1/],
    [`${good}ceilings: {cpu_us: 2.5}\n`, 'ceilings.cpu_us', /2\.5 must be a whole number/],
    [`${good}ceilings: {memory_bytes: 2GiB}\n`, 'ceilings.memory_bytes', /"2GiB" must be a whole number/],
  ])('names the key and reason of a bad file: %j', (text, key, reason) => {
    const result = compileHuntFile('/h/x.yaml', text, 0.8);
    expect(result.kind).toBe('invalid');
    if (result.kind !== 'invalid') return;
    if (key) expect(result.key).toBe(key);
    expect(`${result.key} ${result.reason}`).toMatch(reason);
    expect(result.file).toBe('/h/x.yaml');
  });

  it('reads per-hunt ceilings; none by default', () => {
    const result = compileHuntFile('/h/a.yaml', `${good}ceilings: {memory_bytes: 1073741824, duration_ms: 60000}\n`, 0.8);
    expect(result).toMatchObject({ kind: 'hunt', spec: { ceilings: { memoryBytes: 1073741824, durationMs: 60000 } } });
    if (result.kind === 'hunt') expect(result.spec.ceilings.cpuUs).toBeUndefined();
    expect(compileHuntFile('/h/b.yaml', good, 0.8)).toMatchObject({ kind: 'hunt', spec: { ceilings: {} } });
  });

  it('skips other modes without calling them errors', () => {
    const result = compileHuntFile('/h/a.yaml', 'schedule: {mode: anchored}\nqueries: [SELECT 1]\n', 0.8);
    expect(result).toMatchObject({ kind: 'skipped', reason: expect.stringMatching(/anchored/) });
  });
});

describe('hunts directory', () => {
  let dirs: Array<{ remove(): void }> = [];
  afterEach(() => {
    for (const d of dirs) d.remove();
    dirs = [];
  });

  it('loads the good files and skips a bad one with a warning naming file and reason', () => {
    const hunts = tempHuntsDir();
    dirs.push(hunts);
    hunts.write('one', 'schedule: {mode: rate, interval: 60}\nqueries: [SELECT 1]\n');
    hunts.write('two', 'schedule: {mode: rate, interval: "*/5 * * * *"}\nqueries: [SELECT 2]\n');
    hunts.write('broken', 'schedule: {mode: rate, interval: soon}\nqueries: [SELECT 3]\n');
    hunts.write('anchored', 'schedule: {mode: anchored}\nqueries: [SELECT 4]\n');
    const set = loadHuntsDir(hunts.dir, 0.8);
    expect(set.hunts.map((h) => [h.huntId, h.intervalSeconds])).toEqual([
      ['one', 60],
      ['two', 300],
    ]);
    expect(set.invalid).toHaveLength(1);
    expect(set.skipped).toHaveLength(1);
    const { logger: log, lines } = capturingLogger();
    logHuntSet(log, set);
    const warning = lines.find((l) => l.level === 40);
    expect(warning?.msg).toMatch(/broken\.yaml.*schedule\.interval.*"soon"/);
  });

  it('refuses an unreadable directory with the variable to fix', () => {
    expect(() => loadHuntsDir('/nonexistent/hunts', 0.8)).toThrow(/DFE_HUNTS_DIR|hunts directory/);
  });
});
