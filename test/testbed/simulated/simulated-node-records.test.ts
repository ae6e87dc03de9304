import { describe, expect, it } from 'vitest';
import {
  NO_CNI_MESSAGE,
  SimulatedNodeRecords,
} from '../../../src/testbed/simulated/simulated-node-records.js';

const q = new URLSearchParams();
const bootstrapUser = { name: 'system:bootstrap:abcdef', groups: ['system:bootstrappers'] };
const csr = {
  apiVersion: 'certificates.k8s.io/v1',
  kind: 'CertificateSigningRequest',
  metadata: { generateName: 'csr-' },
  spec: {
    request: Buffer.from(
      '-----BEGIN CERTIFICATE REQUEST-----\nx\n-----END CERTIFICATE REQUEST-----\n',
    ).toString('base64'),
    signerName: 'kubernetes.io/kube-apiserver-client-kubelet',
    usages: ['client auth'],
    username: 'system:admin',
  },
};

/** A bootstrap-token kubelet's POST of `csr`. */
const post = (r: SimulatedNodeRecords) =>
  r.handle(
    'POST',
    '/apis/certificates.k8s.io/v1/certificatesigningrequests',
    'application/json',
    q,
    csr,
    bootstrapUser,
  );

describe('SimulatedNodeRecords', () => {
  it('after a restore from a snapshot, numbers new CSRs after the restored ones (no name collision)', () => {
    const before = new SimulatedNodeRecords(new Map(), new Map());
    expect(post(before)).toMatchObject({ code: 201 });
    const restore = () => {
      const r = new SimulatedNodeRecords(new Map(), new Map());
      for (const [k, v] of before.csrs) r.csrs.set(k, v);
      return r;
    };
    // Restored without renumbering, the first generated name is taken: a real API server's random
    // suffix would not collide.
    expect(post(restore())).toMatchObject({ code: 409 });
    const after = restore();
    after.resumeNumbering();
    expect(post(after)).toMatchObject({ code: 201 });
    expect(after.csrs.size).toBe(2);
  });

  it("stamps a JoiningNode's creationTimestamp itself (whole seconds, the client's ignored) and keeps it on apply", () => {
    let now = new Date('2026-12-07T08:00:10.734Z');
    const r = new SimulatedNodeRecords(new Map(), new Map(), () => now);
    const joining = {
      apiVersion: 'update.edgeless.systems/v1alpha1',
      kind: 'JoiningNode',
      metadata: { name: 'worker-1', creationTimestamp: '2020-01-01T00:00:00Z' },
      spec: {
        name: 'worker-1',
        componentsreference: 'k',
        iscontrolplane: false,
        deadline: '2026-12-09T08:00:00Z',
      },
    };
    const path = '/apis/update.edgeless.systems/v1alpha1/joiningnodes';
    const created = r.handle('POST', path, 'application/json', q, joining, bootstrapUser);
    expect(created).toMatchObject({
      code: 201,
      body: { metadata: { creationTimestamp: '2026-12-07T08:00:10Z' } },
    });
    now = new Date('2026-12-07T08:05:00Z');
    const apply = new URLSearchParams({ fieldManager: 'confboot' });
    const applied = r.handle(
      'PATCH',
      `${path}/worker-1`,
      'application/apply-patch+yaml',
      apply,
      joining,
      bootstrapUser,
    );
    expect(applied).toMatchObject({
      code: 200,
      body: { metadata: { creationTimestamp: '2026-12-07T08:00:10Z' } },
    });
    const fresh = { ...joining, metadata: { name: 'worker-2' }, spec: { ...joining.spec, name: 'worker-2' } };
    expect(
      r.handle('PATCH', `${path}/worker-2`, 'application/apply-patch+yaml', apply, fresh, bootstrapUser),
    ).toMatchObject({ code: 201, body: { metadata: { creationTimestamp: '2026-12-07T08:05:00Z' } } });
  });

  it("records a CSR's requester from authentication, never from the body", () => {
    const r = new SimulatedNodeRecords(new Map(), new Map());
    const a = post(r);
    expect(a).toMatchObject({
      code: 201,
      body: { spec: { username: 'system:bootstrap:abcdef', groups: ['system:bootstrappers'] } },
    });
  });

  it('takes one decision per CSR, and signs nothing that is not approved', () => {
    const r = new SimulatedNodeRecords(new Map(), new Map());
    post(r);
    const name = [...r.csrs.keys()][0] as string;
    const path = `/apis/certificates.k8s.io/v1/certificatesigningrequests/${name}`;
    const cert = { status: { certificate: Buffer.from('-----BEGIN CERTIFICATE-----').toString('base64') } };
    expect(r.handle('PUT', `${path}/status`, 'application/json', q, cert, bootstrapUser)).toHaveProperty(
      'violation',
    );
    const deny = {
      metadata: { name },
      status: { conditions: [{ type: 'Denied', status: 'True', reason: 'NodeNameMismatch' }] },
    };
    expect(r.handle('PUT', `${path}/approval`, 'application/json', q, deny, bootstrapUser)).toMatchObject({
      code: 200,
    });
    const approve = {
      metadata: { name },
      status: { conditions: [...deny.status.conditions, { type: 'Approved', status: 'True', reason: 'X' }] },
    };
    expect(r.handle('PUT', `${path}/approval`, 'application/json', q, approve, bootstrapUser)).toMatchObject({
      violation: expect.stringContaining('already decided'),
    });
    expect(r.handle('PUT', `${path}/status`, 'application/json', q, cert, bootstrapUser)).toHaveProperty(
      'violation',
    );
  });

  it('lets a kubelet register only its own Node, and shows it NotReady while no CNI is installed', () => {
    const r = new SimulatedNodeRecords(new Map(), new Map());
    const node = { name: 'system:node:w1', groups: ['system:nodes'] };
    const body = (name: string) => ({ apiVersion: 'v1', kind: 'Node', metadata: { name } });
    expect(r.handle('POST', '/api/v1/nodes', 'application/json', q, body('w2'), node)).toMatchObject({
      code: 403,
    });
    expect(r.handle('POST', '/api/v1/nodes', 'application/json', q, body('w1'), node)).toMatchObject({
      code: 201,
    });
    const ready = { status: { conditions: [{ type: 'Ready', status: 'True', reason: 'KubeletReady' }] } };
    r.handle('PATCH', '/api/v1/nodes/w1/status', 'application/merge-patch+json', q, ready, node);
    expect(r.handle('GET', '/api/v1/nodes/w1', undefined, q, {}, node)).toMatchObject({
      body: { status: { conditions: [{ type: 'Ready', status: 'False', message: NO_CNI_MESSAGE }] } },
    });
    r.cni = true;
    expect(r.handle('GET', '/api/v1/nodes/w1', undefined, q, {}, node)).toMatchObject({
      body: { status: { conditions: [{ type: 'Ready', status: 'True' }] } },
    });
  });
});
