import { DfeError, showValue } from '../errors.js';
import { DATABASE_NAME } from '../config/schema.js';

/** Validates a database name and returns it backtick-quoted, ready for SQL text. */
export function quoteDatabase(name: string, key = 'database'): string {
  if (!DATABASE_NAME.test(name)) {
    throw new DfeError('IDENTIFIER_INVALID', `${key}=${showValue(name)} is not a valid database name (^[A-Za-z0-9_-]+$)`, {
      key,
      value: name,
    });
  }
  return `\`${name}\``;
}

const TABLE_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** `db`.`table` for a validated database and a code-defined table name. */
export function qualifiedTable(database: string, table: string): string {
  if (!TABLE_NAME.test(table)) {
    throw new DfeError('IDENTIFIER_INVALID', `table=${showValue(table)} is not a valid table name`, { key: 'table', value: table });
  }
  return `${quoteDatabase(database)}.\`${table}\``;
}

const COLUMN_NAME = /^[A-Za-z_][A-Za-z0-9_.]*$/;

/** A column name from configuration (e.g. a hunt's window_column), backtick-quoted. */
export function quoteColumn(name: string, key = 'column'): string {
  if (!COLUMN_NAME.test(name)) {
    throw new DfeError('IDENTIFIER_INVALID', `${key}=${showValue(name)} is not a valid column name`, { key, value: name });
  }
  return `\`${name}\``;
}
