/**
 * Peer addresses and the one canonical spelling of an IP address (src/ports/peer-address.ts), which
 * the ticket issuer (who is calling, which CSR addresses are the caller's) and the metadata peer
 * identity (which instance has the caller's VPC IP) compare addresses in. The rows come from both
 * of their tests; the metadata peer identity's IPv6 row now expects the eight-group spelling.
 */
import { describe, expect, it } from 'vitest';
import { callerIp, canonicalIp, sourceKey } from '../../src/ports/peer-address.js';

describe('sourceKey: what per-source limits count an address under', () => {
  it.each([
    ['10.0.0.3', '10.0.0.3'],
    ['::ffff:10.0.0.3', '10.0.0.3'],
    ['2001:db8:0:1::5', '2001:db8:0:1::/64'],
    ['2001:db8:0:1:ffff:ffff:ffff:ffff', '2001:db8:0:1::/64'],
    ['2001:DB8:0:1:0:0:0:abcd', '2001:db8:0:1::/64'],
    ['2001:db8:0:2::5', '2001:db8:0:2::/64'],
    ['::1', '0:0:0:0::/64'],
    ['unix-socket', 'unix-socket'],
  ])('sourceKey(%j) = %j', (address, want) => {
    expect(sourceKey(address)).toBe(want);
  });

  it('one /64 is one source, neighbouring /64s are not, and IPv4 addresses stay apart', () => {
    const many = Array.from(
      { length: 1000 },
      (_, i) => `2001:db8:0:7:${i.toString(16)}::${(i * 7).toString(16)}`,
    );
    expect(new Set(many.map(sourceKey)).size).toBe(1);
    expect(sourceKey('2001:db8:0:7::1')).not.toBe(sourceKey('2001:db8:0:8::1'));
    expect(sourceKey('10.0.0.1')).not.toBe(sourceKey('10.0.0.2'));
  });
});

describe('callerIp and canonicalIp', () => {
  it.each([
    ['10.0.0.3:40000', '10.0.0.3'],
    ['[2001:db8::1]:443', '2001:db8:0:0:0:0:0:1'],
    ['2001:db8::1:443', '2001:db8:0:0:0:0:0:1'],
    ['::1:5000', '0:0:0:0:0:0:0:1'],
    ['::ffff:10.0.0.3:40000', '10.0.0.3'],
    ['::ffff:a00:3:40000', '10.0.0.3'],
    ['10.0.0.3', '10.0.0.3'],
    ['unknown peer', undefined],
    ['host.example:443', undefined],
  ])('callerIp(%j) = %j', (peer, want) => {
    expect(callerIp(peer)).toBe(want);
  });

  it.each([
    ['2001:DB8:0000::1', '2001:db8:0:0:0:0:0:1'],
    ['::', '0:0:0:0:0:0:0:0'],
    ['1:2:3:4:5:6:7:8', '1:2:3:4:5:6:7:8'],
    ['64:ff9b::192.0.2.33', '64:ff9b:0:0:0:0:c000:221'],
    ['256.0.0.1', undefined],
    ['01.0.0.1', undefined],
    ['1.2.3', undefined],
    ['1:2:3:4:5:6:7:8:9', undefined],
    ['1::2::3', undefined],
    ['1:2:3:4:5:6:7::8', undefined],
    ['fe80::1%eth0', undefined],
    ['', undefined],
  ])('canonicalIp(%j) = %j', (ip, want) => {
    expect(canonicalIp(ip)).toBe(want);
  });

  // Formerly the metadata peer identity's own canonicalIp, which wrote IPv6 in its shortest form.
  it.each([
    ['10.0.0.1', '10.0.0.1'],
    ['::FFFF:10.0.0.1', '10.0.0.1'],
    ['2001:DB8:0::1', '2001:db8:0:0:0:0:0:1'],
    ['fe80::1%eth0', undefined],
    ['10.0.0', undefined],
  ])('canonicalIp(%j) = %j (metadata peer identity rows)', (ip, want) => {
    expect(canonicalIp(ip)).toBe(want);
  });
});
