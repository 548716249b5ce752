import { describe, expect, it } from 'vitest';
import { insertTarget, outputTables } from '../../src/schedule/output-tables.js';

describe('a hunt statement names the table it writes', () => {
  it('reads the target of INSERT INTO, qualified, quoted or not', () => {
    expect(insertTarget('INSERT INTO dfe.detections SELECT 1')).toEqual({ database: 'dfe', table: 'detections' });
    expect(insertTarget('insert into table `my-db`.`out put` (a) SELECT 1')).toEqual({ database: 'my-db', table: 'out put' });
    expect(insertTarget('INSERT INTO "db" . "t" VALUES')).toEqual({ database: 'db', table: 't' });
    expect(insertTarget('INSERT INTO detections(a, b) SELECT 1, 2')).toEqual({ database: undefined, table: 'detections' });
  });

  it('looks past leading comments and whitespace', () => {
    expect(insertTarget('  -- writes the detections\n/* and more */\n INSERT INTO d.t SELECT 1')).toEqual({ database: 'd', table: 't' });
  });

  it('names no table for a SELECT or an INSERT INTO FUNCTION', () => {
    expect(insertTarget('SELECT sleep(1)')).toBeUndefined();
    expect(insertTarget("INSERT INTO FUNCTION file('x.csv') SELECT 1")).toBeUndefined();
    expect(insertTarget('INSERT INTO function_results SELECT 1')).toEqual({ database: undefined, table: 'function_results' });
  });

  it('lists each table once, in order of first use', () => {
    const statements = ['INSERT INTO a.x SELECT 1', 'SELECT 2', 'INSERT INTO b.y SELECT 3', 'INSERT INTO a.x SELECT 4'].map((query) => ({ query }));
    expect(outputTables(statements)).toEqual([
      { database: 'a', table: 'x' },
      { database: 'b', table: 'y' },
    ]);
  });
});
