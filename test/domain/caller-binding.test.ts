/**
 * Binding a ticket request to its caller (the ticket issuer's test covers the whole join and
 * rejoin; these are the rules one by one): who the caller is, which owner string a disk binding
 * records, that a disk bound to another owner is refused, and which addresses a host certificate
 * may name.
 */
import { describe, expect, it } from 'vitest';
import { bindDisk, checkCaller, ownerOf, resolveCaller } from '../../src/domain/caller-binding.js';
import { isDiskBoundError } from '../../src/ports/disk-bindings.js';
import { isConfbootError } from '../../src/ports/errors.js';
import type { PeerIdentity, PeerInstance } from '../../src/ports/peer-identity.js';
import { RecordingLogger, StubCa, StubDiskBindings } from './stubs.js';

const PEER = { peer: '192.0.2.5:40000', variant: 'qemu-vtpm' };
const NODE_1: PeerInstance = {
  name: 'Node_1',
  ips: ['192.0.2.5', '10.0.0.5'],
  role: 'Worker',
  instanceId: 'i-1',
};

function identity(instances: Record<string, PeerInstance>): PeerIdentity {
  return { resolve: (ip) => Promise.resolve(instances[ip]) };
}

describe('caller binding', () => {
  it('without a PeerIdentity the caller is its address, and the disk is bound to it', async () => {
    const caller = await resolveCaller(undefined, 'op', PEER);
    expect(caller).toEqual({ ip: '192.0.2.5' });
    expect(ownerOf(caller, PEER.peer)).toEqual({ owner: 'address/192.0.2.5' });
  });

  it('with one, the caller is its instance: name folded, owner its ID, by-name owner kept as legacy', async () => {
    const caller = await resolveCaller(identity({ '192.0.2.5': NODE_1 }), 'op', PEER);
    expect(caller.name).toBe('node-1');
    expect(ownerOf(caller, PEER.peer)).toEqual({ owner: 'instance-id/i-1', legacyOwner: 'instance/node-1' });
  });

  it('refuses a caller that is no instance of this cluster (permission-denied)', async () => {
    const err = await resolveCaller(identity({}), 'op', PEER).catch((e: unknown) => e);
    expect(isConfbootError(err) && err.code).toBe('permission-denied');
  });

  it("names the instance's addresses as the node's (for the host certificate)", async () => {
    const ca = new StubCa();
    const bound = await checkCaller(
      identity({ '192.0.2.5': NODE_1 }),
      'op',
      PEER,
      {
        diskUuid: 'd',
        certificateRequest: new Uint8Array(1),
        isControlPlane: false,
        hostPublicKey: new Uint8Array(),
        hostCertificatePrincipals: [],
      },
      'node-1',
      await ca.inspectCsr(new Uint8Array(1)),
    );
    expect(bound.addresses).toEqual(['192.0.2.5', '10.0.0.5']);
    expect(bound.ipAddresses).toEqual(['192.0.2.5']);
  });

  it('refuses a disk bound to another owner, and keeps a disk bound to the caller', async () => {
    const deps = { diskBindings: new StubDiskBindings(), logger: new RecordingLogger() };
    const mine = { diskUuid: 'd', nodeName: 'node-1', owner: 'address/192.0.2.5' };
    await expect(bindDisk(deps, 'op', mine)).resolves.toEqual(mine);
    await expect(bindDisk(deps, 'op', mine)).resolves.toEqual(mine);
    const err = await bindDisk(deps, 'op', { ...mine, owner: 'address/192.0.2.6' }).catch((e: unknown) => e);
    expect(isDiskBoundError(err)).toBe(true);
  });
});
