import { describe, expect, it } from 'vitest';
import { openClickHouse } from '../../src/clickhouse/client.js';
import { loadConfig } from '../../src/config/load.js';
import { isDfeError } from '../../src/errors.js';

describe('openClickHouse (server backend)', () => {
  it('an unreadable CA certificate is a config error naming the variable and the path', async () => {
    const config = loadConfig({ DFE_CLICKHOUSE_URL: 'https://127.0.0.1:8443', DFE_CLICKHOUSE_CA_CERT: '/nonexistent/ca.pem' });
    const err = await openClickHouse(config.clickhouse).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(isDfeError(err, 'CONFIG_INVALID')).toBe(true);
    expect((err as Error).message).toContain('DFE_CLICKHOUSE_CA_CERT');
    expect((err as Error).message).toContain('/nonexistent/ca.pem');
  });

  it('credentials in the URL are split off: the target never shows them', async () => {
    const config = loadConfig({ DFE_CLICKHOUSE_URL: 'http://reader:s3cret@127.0.0.1:1' });
    expect(config.clickhouse.url).toBe('http://127.0.0.1:1');
    expect(config.clickhouse.username).toBe('reader');
    expect(config.clickhouse.password).toBe('s3cret');
    const handle = await openClickHouse(config.clickhouse);
    try {
      expect(handle.target).not.toContain('s3cret');
    } finally {
      await handle.close();
    }
  });
});
