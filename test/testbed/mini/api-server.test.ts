/**
 * mini's master-secret path to the SIMULATED Kubernetes API server (the API server is a fake: no
 * Kubernetes runs here; everything else is real — the simulated kubeadm init's real cluster CA, a
 * serving certificate it signs, real TLS on loopback, the operator's HTTPS client).
 * - The admin token is random per run and lives only in admin.conf (no fixed token).
 * - The API server serves HTTPS with a certificate from the cluster CA; the operator sends the
 *   master secret only to a server whose certificate verifies against the CA from init's kubeconfig.
 * - The operator's own creation must win: a Secret someone created first is a refusal naming the
 *   conflict, and the stored Secret is read back and compared.
 */

import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { createServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import {
  apiAccessFromKubeconfig,
  MasterSecretUploadError,
  uploadMasterSecret,
} from '../../../src/adapters/kubernetes/master-secret-upload.js';
import { loadApiServerCredentials } from '../../../src/testbed/simulated/apiserver-credentials.js';
import { FakeKubeApi, MASTER_SECRET_NAME } from '../../../src/testbed/simulated/simulated-kube-api.js';
import { requestText } from '../../support/net.js';
import { simulatedInit as simulatedInitIn } from '../../support/simulated-init.js';
import { useTmpDirs } from '../../support/tmp.js';

const tmp = useTmpDirs('confboot-mini-api-');

/** What the simulated `kubeadm init` leaves on the control plane: PKI, admin.conf with a token. */
const simulatedInit = () => simulatedInitIn(tmp());

/** The control plane's API server as mini's agent starts it, and the kubeconfig init returns. */
async function controlPlane() {
  const { pkiDir, adminConfPath } = await simulatedInit();
  const credentials = await loadApiServerCredentials(pkiDir, adminConfPath);
  if (credentials === undefined) throw new Error('no credentials');
  const api = await new FakeKubeApi({ bearerToken: credentials.token, tls: credentials }).start();
  // admin.conf names the node's address; the test's server listens on a free port.
  const kubeconfig = (await readFile(adminConfPath, 'utf8')).replace(
    'https://127.0.0.1:6443',
    `https://127.0.0.1:${api.port}`,
  );
  return { api, kubeconfig, credentials };
}

const secret = () => ({ masterSecret: randomBytes(32), salt: randomBytes(32) });
const soon = () => Date.now() + 30_000;

async function refusal(p: Promise<unknown>): Promise<MasterSecretUploadError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(MasterSecretUploadError);
  return err as MasterSecretUploadError;
}

describe('mini master secret to the SIMULATED API server: random token, verified TLS, own upload wins', () => {
  it('stores the operator’s master secret over TLS verified against the cluster CA from init', async () => {
    const { api, kubeconfig } = await controlPlane();
    try {
      const s = secret();
      await uploadMasterSecret(apiAccessFromKubeconfig(kubeconfig), s, { deadline: soon() });
      const stored = api.secrets.get(MASTER_SECRET_NAME);
      expect(Buffer.from(stored?.data.mastersecret, 'base64').equals(s.masterSecret)).toBe(true);
      expect(Buffer.from(stored?.data.salt, 'base64').equals(s.salt)).toBe(true);
      expect(api.violations).toEqual([]);
    } finally {
      await api.close();
    }
  });

  it('the admin token is random per run and only in admin.conf; a fixed or missing token is refused', async () => {
    const a = await simulatedInit();
    const b = await simulatedInit();
    const ta = (await loadApiServerCredentials(a.pkiDir, a.adminConfPath))?.token;
    const tb = (await loadApiServerCredentials(b.pkiDir, b.adminConfPath))?.token;
    expect(ta).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(ta).not.toBe(tb);
    expect(new FakeKubeApi().bearerToken).not.toBe(new FakeKubeApi().bearerToken);
    expect(() => new FakeKubeApi({ bearerToken: 'short' })).toThrow(/at least 16/);

    const { api, kubeconfig } = await controlPlane();
    try {
      // Another VM on the bridge: the old fixed token, or none, gets 401 and plants nothing.
      const access = apiAccessFromKubeconfig(kubeconfig);
      for (const token of ['fake-admin-token', 'x'.repeat(43)]) {
        const err = await refusal(uploadMasterSecret({ ...access, token }, secret(), { deadline: soon() }));
        expect(err.check).toBe('unauthorized');
      }
      expect(api.secrets.has(MASTER_SECRET_NAME)).toBe(false);
      await uploadMasterSecret(access, secret(), { deadline: soon() });
      expect(api.secrets.has(MASTER_SECRET_NAME)).toBe(true);
    } finally {
      await api.close();
    }
  });

  it('refuses, naming the conflict, when a master-secret Secret already exists', async () => {
    const { api, kubeconfig } = await controlPlane();
    try {
      const access = apiAccessFromKubeconfig(kubeconfig);
      const planted = secret();
      await uploadMasterSecret(access, planted, { deadline: soon() });
      const ours = secret();
      const err = await refusal(uploadMasterSecret(access, ours, { deadline: soon() }));
      expect(err.check).toBe('conflict');
      expect(err.message).toMatch(/kube-system\/constellation-mastersecret already exists/);
      for (const b of [ours.masterSecret, ours.salt])
        for (const enc of ['base64', 'hex'] as const) expect(err.message).not.toContain(b.toString(enc));
      // The first upload is still what the cluster holds.
      const stored = api.secrets.get(MASTER_SECRET_NAME);
      expect(Buffer.from(stored?.data.mastersecret, 'base64').equals(planted.masterSecret)).toBe(true);
    } finally {
      await api.close();
    }
  });

  it('sends nothing to a server whose certificate is not from the cluster CA from init', async () => {
    const { api: real, kubeconfig } = await controlPlane();
    await real.close();
    // An impostor with a whole cluster PKI of its own (a valid certificate for 127.0.0.1, another CA).
    const { api: impostor } = await controlPlane();
    try {
      const access = apiAccessFromKubeconfig(kubeconfig);
      const err = await refusal(
        uploadMasterSecret({ ...access, server: new URL(`https://127.0.0.1:${impostor.port}`) }, secret(), {
          deadline: soon(),
        }),
      );
      expect(err.check).toBe('tls');
      expect(err.message).toMatch(/does not verify against the cluster CA from init/);
      expect(impostor.requests).toEqual([]);
      expect(impostor.secrets.has(MASTER_SECRET_NAME)).toBe(false);
    } finally {
      await impostor.close();
    }
  });

  it('refuses kubeconfigs without verified HTTPS or without a token', async () => {
    const { api, kubeconfig } = await controlPlane();
    await api.close();
    const plain = new FakeKubeApi().kubeconfig('http://127.0.0.1:6443');
    expect(() => apiAccessFromKubeconfig(plain)).toThrow(/turns TLS verification off/);
    expect(() => apiAccessFromKubeconfig(kubeconfig.replace('https://', 'http://'))).toThrow(/not https/);
    expect(() => apiAccessFromKubeconfig(kubeconfig.replace(/token: .*/, 'token: ""'))).toThrow(
      /no bearer token/,
    );
    expect(() =>
      apiAccessFromKubeconfig(kubeconfig.replace(/certificate-authority-data: .*/, 'x: 1')),
    ).toThrow(/no certificate-authority-data/);
  });

  it('refuses when the Secret read back is not the operator’s (a lying API server)', async () => {
    const { kubeconfig, credentials } = await controlPlane();
    const server = createServer({ cert: credentials.certPem, key: credentials.keyPem }, (req, res) => {
      req.resume();
      req.on('end', () => {
        res.writeHead(req.method === 'POST' ? 201 : 200, { 'content-type': 'application/json' });
        res.end(
          JSON.stringify({
            data: {
              mastersecret: randomBytes(32).toString('base64'),
              salt: randomBytes(32).toString('base64'),
            },
          }),
        );
      });
    });
    await new Promise<void>((ok) => server.listen(0, '127.0.0.1', ok));
    try {
      const access = apiAccessFromKubeconfig(kubeconfig);
      const port = (server.address() as AddressInfo).port;
      const err = await refusal(
        uploadMasterSecret({ ...access, server: new URL(`https://127.0.0.1:${port}`) }, secret(), {
          deadline: soon(),
        }),
      );
      expect(err.check).toBe('read-back');
    } finally {
      server.closeAllConnections();
      await new Promise((ok) => server.close(ok));
    }
  });

  it('waits for an API server that is not listening yet (nothing sent), within the deadline', async () => {
    const { api, kubeconfig, credentials } = await controlPlane();
    const port = api.port;
    await api.close();
    const access = apiAccessFromKubeconfig(kubeconfig);
    const waits: string[] = [];
    let refused = () => {};
    const firstRefusal = new Promise<void>((r) => {
      refused = r;
    });
    const upload = uploadMasterSecret(access, secret(), {
      deadline: soon(),
      retryDelayMs: 50,
      onWait: (line) => {
        waits.push(line);
        refused();
      },
    });
    // The server starts only after an attempt was refused, so the wait itself is what is tested.
    await Promise.race([
      firstRefusal,
      upload.then(() => {
        throw new Error('the upload ended without waiting for the API server');
      }),
    ]);
    expect(waits[0]).toMatch(/not reachable yet \(ECONNREFUSED\); retrying in 50 ms/);
    const later = await new FakeKubeApi({ bearerToken: credentials.token, tls: credentials }).start(
      '127.0.0.1',
      port,
    );
    try {
      await upload;
      expect(later.secrets.has(MASTER_SECRET_NAME)).toBe(true);
    } finally {
      await later.close();
    }
    // Past the deadline a refused connection is final.
    const err = await refusal(
      uploadMasterSecret(access, secret(), { deadline: Date.now(), retryDelayMs: 50 }),
    );
    expect(err.check).toBe('network');
  });

  it('answers its health endpoints without a token, as a real API server does, and refuses everything else without one', async () => {
    const { api, credentials } = await controlPlane();
    try {
      const get = (path: string) =>
        requestText({ https: true, port: api.port, path, ca: credentials.caPem, servername: '127.0.0.1' });
      for (const path of ['/healthz', '/livez', '/readyz'])
        expect(await get(path)).toEqual({ status: 200, body: 'ok' });
      expect(api.violations).toEqual([]);
      expect((await get('/api/v1/namespaces/kube-system/secrets')).status).toBe(401);
      expect(api.violations).toEqual([
        'GET /api/v1/namespaces/kube-system/secrets: missing or wrong bearer token',
      ]);
    } finally {
      await api.close();
    }
  });
});
