/**
 * dnsmasq leases as the QEMU metadata server reads them: one lease per line,
 * `<expiry> <mac> <ip> <hostname> <client-id>`, whitespace-separated. Each lease becomes a peer in
 * upstream's JSON shape.
 */
import { readFile } from 'node:fs/promises';

/** One DHCP lease. */
export interface Lease {
  expiry: string;
  mac: string;
  ip: string;
  hostname: string;
}

/** Upstream `metadata.InstanceMetadata` as Go's encoding/json writes it (field names, no tags). */
export interface WireInstanceMetadata {
  Name: string;
  ProviderID: string;
  Role: string;
  VPCIP: string;
  SecondaryIPRange: string;
  AliasIPRanges: string[] | null;
}

/**
 * Parses a leases file's text. Blank lines are skipped; a line with fewer than four fields is an
 * error naming the line, so a corrupt file is reported rather than half-read.
 */
export function parseLeases(text: string): Lease[] {
  const leases: Lease[] = [];
  const lines = text.split('\n');
  for (const [i, raw] of lines.entries()) {
    const line = raw.trim();
    if (line === '') continue;
    const f = line.split(/\s+/);
    if (f.length < 4) throw new Error(`leases line ${i + 1}: expected "<expiry> <mac> <ip> <hostname> …"`);
    leases.push({ expiry: f[0]!, mac: f[1]!, ip: f[2]!, hostname: f[3]! });
  }
  return leases;
}

/** Reads and parses a leases file. */
export async function readLeases(path: string): Promise<Lease[]> {
  return parseLeases(await readFile(path, 'utf8'));
}

/** A lease as a peer: role ControlPlane when the hostname starts with `control-plane`. */
export function leaseToPeer(lease: Lease): WireInstanceMetadata {
  return {
    Name: lease.hostname,
    ProviderID: `qemu:///hostname/${lease.hostname}`,
    Role: lease.hostname.startsWith('control-plane') ? 'ControlPlane' : 'Worker',
    VPCIP: lease.ip,
    SecondaryIPRange: '',
    AliasIPRanges: null,
  };
}
