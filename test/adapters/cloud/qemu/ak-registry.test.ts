import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { FileQemuAkRegistry } from '../../../../src/adapters/cloud/qemu/ak-registry.js';
import { useTmpDirs } from '../../../support/tmp.js';

const tmp = useTmpDirs('confboot-ak-registry-');
const AK1 = Buffer.from('TPMT_PUBLIC of control-plane-0');
const AK2 = Buffer.from('TPMT_PUBLIC of worker-0');

function identities(content: unknown): string {
  const path = join(tmp(), 'identities.json');
  writeFileSync(path, typeof content === 'string' ? content : JSON.stringify(content));
  return path;
}

const TWO_VMS = {
  'control-plane-0': { ip: '10.42.0.2', attestationKeyPublic: AK1.toString('base64') },
  'worker-0': { ip: '10.42.0.3', attestationKeyPublic: AK2.toString('base64') },
};

describe('FileQemuAkRegistry', () => {
  it("gives the AK of the one VM at the caller's address, also for an IPv4-mapped IPv6 address", async () => {
    const registry = new FileQemuAkRegistry(identities(TWO_VMS));
    const cp = await registry.registeredAk({ peerAddress: '10.42.0.2' });
    expect(cp.attester).toBe('control-plane-0 (10.42.0.2)');
    expect(Buffer.from(cp.akPub ?? []).equals(AK1)).toBe(true);
    const worker = await registry.registeredAk({ peerAddress: '::ffff:10.42.0.3' });
    expect(Buffer.from(worker.akPub ?? []).equals(AK2)).toBe(true);
  });

  it('re-reads the file on every call, so a VM added later is known', async () => {
    const path = identities({});
    const registry = new FileQemuAkRegistry(path);
    expect((await registry.registeredAk({ peerAddress: '10.42.0.3' })).akPub).toBeUndefined();
    writeFileSync(path, JSON.stringify(TWO_VMS));
    expect((await registry.registeredAk({ peerAddress: '10.42.0.3' })).akPub).toBeDefined();
  });

  it('finds nothing without a peer address, for an unknown address, or for an address two VMs claim', async () => {
    const registry = new FileQemuAkRegistry(identities(TWO_VMS));
    expect((await registry.registeredAk()).akPub).toBeUndefined();
    const stranger = await registry.registeredAk({ peerAddress: '10.42.0.9' });
    expect(stranger.akPub).toBeUndefined();
    expect(stranger.attester).toMatch(/^the caller 10\.42\.0\.9 \(no VM registered at that address/);
    const twice = new FileQemuAkRegistry(
      identities({ ...TWO_VMS, impostor: { ip: '10.42.0.2', attestationKeyPublic: AK2.toString('base64') } }),
    );
    const clash = await twice.registeredAk({ peerAddress: '10.42.0.2' });
    expect(clash.akPub).toBeUndefined();
    expect(clash.attester).toMatch(/\(2 VMs registered at that address/);
  });

  it('finds no key for a VM registered without one', async () => {
    const registry = new FileQemuAkRegistry(
      identities({ 'worker-1': { ip: '10.42.0.4', attestationKeyPublic: '' } }),
    );
    const r = await registry.registeredAk({ peerAddress: '10.42.0.4' });
    expect([r.attester, r.akPub]).toEqual(['worker-1 (10.42.0.4)', undefined]);
  });

  it('fails on a missing, unparsable or wrongly shaped file', async () => {
    const at = { peerAddress: '10.42.0.2' };
    await expect(new FileQemuAkRegistry(join(tmp(), 'absent.json')).registeredAk(at)).rejects.toThrow(
      /^reading the registered attestation keys .*absent\.json: /,
    );
    await expect(new FileQemuAkRegistry(identities('{not json')).registeredAk(at)).rejects.toThrow(
      /^reading the registered attestation keys /,
    );
    await expect(new FileQemuAkRegistry(identities([TWO_VMS])).registeredAk(at)).rejects.toThrow(
      /expected a JSON object of identities$/,
    );
  });
});
