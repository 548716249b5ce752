import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/load.js';

/** Settings of the last-good snapshot and peers (docs/failsafe.md#snapshot-and-peers). */
describe('last-good settings', () => {
  it('defaults: no snapshot, no peers, 10 s between writes, 250 ms per peer lookup', () => {
    expect(loadConfig({}).shim.lastGood).toEqual({ snapshotDir: undefined, snapshotIntervalMs: 10_000, peers: [], peerTimeoutMs: 250 });
  });

  it('peers: a comma-separated list of base URLs, blanks dropped', () => {
    const config = loadConfig({ DFE_KEDA_SHIM_PEERS: ' http://shim-peers:8080 , https://10.0.0.7:8443,', DFE_KEDA_SHIM_SNAPSHOT_DIR: '/var/lib/x' });
    expect(config.shim.lastGood.peers).toEqual(['http://shim-peers:8080', 'https://10.0.0.7:8443']);
    expect(config.shim.lastGood.snapshotDir).toBe('/var/lib/x');
  });

  it.each([
    ['shim-peers:8080', 'DFE_KEDA_SHIM_PEERS'],
    ['http://shim-peers:8080/internal', 'DFE_KEDA_SHIM_PEERS'],
    ['http://user:pw@shim-peers:8080', 'DFE_KEDA_SHIM_PEERS'],
    ['ftp://shim-peers', 'DFE_KEDA_SHIM_PEERS'],
  ])('a bad peer list %s is an error naming %s', (value, key) => {
    expect(() => loadConfig({ [key]: value })).toThrow(new RegExp(`invalid ${key}=.*must be comma-separated base URLs`));
  });

  it('credentials in a peer URL are refused and not echoed', () => {
    expect(() => loadConfig({ DFE_KEDA_SHIM_PEERS: 'http://user:s3cret@shim-peers:8080' })).toThrow(/"http:\/\/\[redacted\]@shim-peers:8080"/);
    expect(() => loadConfig({ DFE_KEDA_SHIM_PEERS: 'http://user:s3cret@shim-peers:8080' })).not.toThrow(/s3cret/);
  });

  it('a non-positive interval or timeout is an error naming the variable', () => {
    expect(() => loadConfig({ DFE_KEDA_SHIM_SNAPSHOT_INTERVAL_MS: '0' })).toThrow(/invalid DFE_KEDA_SHIM_SNAPSHOT_INTERVAL_MS="0"/);
    expect(() => loadConfig({ DFE_KEDA_SHIM_PEER_TIMEOUT_MS: 'soon' })).toThrow(/invalid DFE_KEDA_SHIM_PEER_TIMEOUT_MS="soon"/);
  });
});
