import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { DfeError } from '../src/errors.js';
import { loggerOptions, maskUrlUserinfo } from '../src/log.js';

/** Logs carry `{ err }` and pino serialises it; credentials still never reach a line. */
function capture(): { logger: pino.Logger; text: () => string } {
  const raw: string[] = [];
  const logger = pino(loggerOptions({ level: 'info', format: 'json' }), { write: (line: string) => void raw.push(line) });
  return { logger, text: () => raw.join('') };
}

describe('error serialisation', () => {
  it('logs the type, message, stack and fields of an error', () => {
    const { logger, text } = capture();
    logger.error({ err: new DfeError('HUNT_SPEC_INVALID', 'uses {window} but the hunt has no window_column', { file: 'a.yaml', key: 'queries.0' }) }, 'failed');
    const line = JSON.parse(text()) as { err: Record<string, unknown>; msg: string };
    expect(line.msg).toBe('failed');
    expect(line.err).toMatchObject({
      type: 'DfeError',
      code: 'HUNT_SPEC_INVALID',
      message: 'uses {window} but the hunt has no window_column',
      file: 'a.yaml',
      key: 'queries.0',
    });
    expect(String(line.err.stack)).toContain('DfeError: uses {window}');
  });

  it('masks the credentials of a URL in the message, the stack, a cause and a field', () => {
    const { logger, text } = capture();
    const url = 'https://keda:s3cret@pw@ch.example:8443/?database=dfe';
    const cause = new Error(`getaddrinfo ENOTFOUND for ${url}`);
    const err = Object.assign(new Error(`request to ${url} failed`, { cause }), { url, nested: { target: `http://default:hunter2@127.0.0.1:8123` } });
    logger.error({ err }, 'ClickHouse unreachable');
    const out = text();
    expect(out).not.toMatch(/s3cret|hunter2|keda:|default:/);
    expect(out).toContain('https://[redacted]@ch.example:8443/?database=dfe');
    expect(out).toContain('http://[redacted]@127.0.0.1:8123');
    expect(out).toContain('getaddrinfo ENOTFOUND');
  });

  it('keeps the static redaction paths', () => {
    const { logger, text } = capture();
    logger.info({ config: { clickhouse: { url: 'http://ch:8123', password: 'pw-1' } }, headers: { authorization: 'Bearer t-1' } }, 'config');
    expect(text()).not.toMatch(/pw-1|t-1/);
    expect(text()).toContain('http://ch:8123');
  });

  it('masks only the userinfo of URLs', () => {
    expect(maskUrlUserinfo('a https://u:p@h:1/x and ftp://h/y, mail me@example.com')).toBe('a https://[redacted]@h:1/x and ftp://h/y, mail me@example.com');
  });
});
