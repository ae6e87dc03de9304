/**
 * `confboot init`'s exchange with the first node, over real attested TLS on loopback with the
 * test-only dummy attestation: the node receives the master secret as the cluster KMS URI and the
 * operator's settings, and the outcome carries the kubeconfig, cluster ID and the checks made; a
 * node's failure comes back with its log; a node attesting another variant is refused before the
 * request (with the secrets) is sent, naming the check; an unreachable node is a plain failure.
 */
import { afterEach, describe, expect, it } from 'vitest';
import type { AttestedGrpcServer } from '../../../src/adapters/grpc/attested-server.js';
import { createInitServer, type InitServiceHandler } from '../../../src/adapters/grpc/init-server.js';
import { clusterKmsUri, NO_STORE_URI } from '../../../src/adapters/grpc/kms-uri.js';
import { type InitClusterOptions, initCluster } from '../../../src/app/operator/init-cluster.js';
import type { InitRequest } from '../../../src/ports/types.js';
import { clock } from '../../adapters/grpc/helpers.js';
import { DummyIssuer, DummyValidator } from '../../support/dummy-attestation.js';

const servers: AttestedGrpcServer[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.shutdown(200)));
});

async function node(handler: InitServiceHandler, issuer = new DummyIssuer('qemu-vtpm')): Promise<string> {
  const server = createInitServer({ issuer, clock, handler });
  servers.push(server);
  return `127.0.0.1:${await server.listen('127.0.0.1', 0)}`;
}

function options(endpoint: string, progress: string[]): InitClusterOptions {
  return {
    endpoint,
    validators: [new DummyValidator('qemu-vtpm')],
    masterSecret: new Uint8Array(32).fill(7),
    masterSalt: new Uint8Array(32).fill(8),
    measurementSalt: new Uint8Array(32).fill(9),
    initSecret: new TextEncoder().encode('init-secret'),
    clusterName: 'prod',
    kubernetesVersion: 'v1.31.1',
    apiserverCertSans: ['10.0.0.1'],
    serviceCidr: '10.96.0.0/12',
    timeoutInMs: 10_000,
    progress: (line) => progress.push(line),
  };
}

describe('initCluster', () => {
  it('sends the settings with the master secret as KMS URI and returns kubeconfig, cluster ID and checks', async () => {
    const received: InitRequest[] = [];
    const endpoint = await node({
      async *init(r) {
        received.push(r);
        yield {
          kind: 'success',
          result: {
            kubeconfig: new TextEncoder().encode('apiVersion: v1'),
            clusterId: new Uint8Array(32).fill(4),
          },
        };
      },
    });
    const progress: string[] = [];
    const out = await initCluster(options(endpoint, progress));
    expect(out.ok).toBe(true);
    if (!out.ok) return;
    expect([new TextDecoder().decode(out.kubeconfig), out.clusterId]).toEqual([
      'apiVersion: v1',
      new Uint8Array(32).fill(4),
    ]);
    expect(out.attestationChecks.length).toBeGreaterThan(0);
    expect(out.attestationChecks.every((c) => c.startsWith('ok '))).toBe(true);
    expect(received[0]).toMatchObject({
      kmsUri: clusterKmsUri(new Uint8Array(32).fill(7), new Uint8Array(32).fill(8)),
      storageUri: NO_STORE_URI,
      clusterName: 'prod',
      kubernetesVersion: 'v1.31.1',
      apiserverCertSans: ['10.0.0.1'],
      serviceCidr: '10.96.0.0/12',
      conformanceMode: false,
      kubernetesComponents: [],
    });
    expect(progress).toEqual([
      `Connecting to ${endpoint} and verifying the node's attestation`,
      'Node attested; cluster initialised',
    ]);
  });

  it("returns the node's failure with its log", async () => {
    const endpoint = await node({
      async *init() {
        yield { kind: 'failure', error: 'kubeadm init failed' };
        yield { kind: 'log', chunk: new TextEncoder().encode('line 1\nline 2\n') };
      },
    });
    expect(await initCluster(options(endpoint, []))).toEqual({
      ok: false,
      error: 'kubeadm init failed',
      logs: 'line 1\nline 2\n',
    });
  });

  it('refuses a node attesting another variant before sending anything, naming the check', async () => {
    let ran = 0;
    const endpoint = await node(
      {
        async *init() {
          ran++;
          yield { kind: 'failure', error: 'x' };
        },
      },
      new DummyIssuer('dummy'),
    );
    const out = await initCluster(options(endpoint, []));
    expect(out).toMatchObject({ ok: false, check: 'unknown-oid', logs: '', mismatches: [] });
    expect(ran).toBe(0);
  });

  it('reports an unreachable node as a failure without a check', async () => {
    const out = await initCluster({
      ...options('127.0.0.1:9', []),
      timeoutInMs: 2_000,
      handshakeTimeoutMs: 1_000,
    });
    expect(out.ok).toBe(false);
    expect(out).not.toHaveProperty('check');
  });
});
