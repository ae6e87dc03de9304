import { createServer } from 'node:net';
import { describe, expect, it } from 'vitest';
import { freePortOn } from '../../../src/adapters/system/free-port.js';

describe('freePortOn', () => {
  it('gives a port on the address that the caller can then bind', async () => {
    const port = await freePortOn('127.0.0.1');
    expect(port).toBeGreaterThan(0);
    expect(port).toBeLessThan(65536);
    const srv = createServer();
    await new Promise<void>((resolve, reject) => {
      srv.once('error', reject);
      srv.listen(port, '127.0.0.1', resolve);
    });
    const addr = srv.address();
    expect(addr && typeof addr === 'object' ? addr.port : 0).toBe(port);
    await new Promise<void>((resolve) => srv.close(() => resolve()));
  });

  it('rejects for an address this host does not have', async () => {
    // 192.0.2.0/24 is TEST-NET-1, never assigned to a local interface.
    await expect(freePortOn('192.0.2.1')).rejects.toThrow(/EADDRNOTAVAIL/);
  });
});
