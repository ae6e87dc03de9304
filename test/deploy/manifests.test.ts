/**
 * The manifests in deploy/ must agree with the code's defaults: ports, probe paths, mount paths and
 * the flags each container passes.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import * as d from '../../src/app/defaults.js';

const dir = resolve(import.meta.dirname, '../../deploy/kubernetes');
// biome-ignore lint/suspicious/noExplicitAny: manifests are untyped YAML
type Obj = any;
const docs: Obj[] = readdirSync(dir)
  .filter((f) => f.endsWith('.yaml'))
  .flatMap((f) => parseAllDocuments(readFileSync(join(dir, f), 'utf8')).map((doc) => doc.toJS()));
const find = (kind: string, name: string): Obj => {
  const o = docs.find((x) => x?.kind === kind && x?.metadata?.name === name);
  if (!o) throw new Error(`no ${kind}/${name} in deploy/kubernetes`);
  return o;
};
const argsOf = (c: Obj): Record<string, string> =>
  Object.fromEntries(
    (c.args as string[])
      .filter((a) => a.startsWith('--'))
      .map((a) => a.slice(2).split('=') as [string, string]),
  );

describe('deploy/kubernetes manifests', () => {
  it('parse as Kubernetes objects', () => {
    expect(docs.length).toBeGreaterThanOrEqual(6);
    for (const o of docs) {
      expect(o.apiVersion).toBeTruthy();
      expect(o.kind).toBeTruthy();
      expect(o.metadata.namespace).toBe('kube-system');
    }
  });

  describe('join service', () => {
    const ds = find('DaemonSet', 'join-service');
    const c = ds.spec.template.spec.containers[0];
    const args = argsOf(c);

    it("keeps the caller's source IP (externalTrafficPolicy Local), which the identity binding resolves", () => {
      const svc = find('Service', 'join-service');
      expect(svc.spec.externalTrafficPolicy).toBe('Local');
      // Local only works if a join-service pod runs wherever the NodePort is reached: every control plane.
      expect(find('DaemonSet', 'join-service').spec.template.spec.nodeSelector).toHaveProperty([
        'node-role.kubernetes.io/control-plane',
      ]);
    });

    it('runs on control-plane nodes only', () => {
      expect(ds.spec.template.spec.nodeSelector).toHaveProperty(['node-role.kubernetes.io/control-plane']);
    });

    it('listens where the code defaults say and the NodePort forwards there', () => {
      expect(args.listen).toBe(`0.0.0.0:${d.JOIN_SERVICE_PORT}`);
      expect(args['http-listen']).toBe(`0.0.0.0:${d.JOIN_SERVICE_HTTP_PORT}`);
      const ports = c.ports.map((p: Obj) => p.containerPort);
      expect(ports).toEqual([d.JOIN_SERVICE_PORT, d.JOIN_SERVICE_HTTP_PORT]);
      const svc = find('Service', 'join-service');
      expect(svc.spec.type).toBe('NodePort');
      expect(svc.spec.ports[0]).toMatchObject({
        nodePort: d.JOIN_SERVICE_PORT,
        targetPort: d.JOIN_SERVICE_PORT,
      });
      expect(args['key-service-endpoint']).toBe(`key-service.kube-system:${d.KEY_SERVICE_PORT}`);
    });

    it('wires probes to the health endpoints', () => {
      expect(c.livenessProbe.httpGet).toEqual({ path: '/healthz', port: d.JOIN_SERVICE_HTTP_PORT });
      expect(c.readinessProbe.httpGet).toEqual({ path: '/readyz', port: d.JOIN_SERVICE_HTTP_PORT });
    });

    it('mounts the files its flags name', () => {
      const mounts: string[] = c.volumeMounts.map((m: Obj) => m.mountPath);
      const covered = (p: string) => mounts.some((m) => p.startsWith(`${m}/`));
      expect(args['attestation-config']).toBe(d.ATTESTATION_CONFIG_PATH);
      expect(args['measurement-salt-file']).toBe(d.MEASUREMENT_SALT_PATH);
      expect(args['deny-list']).toBe(d.DENY_LIST_PATH);
      for (const p of [
        d.ATTESTATION_CONFIG_PATH,
        d.MEASUREMENT_SALT_PATH,
        d.DENY_LIST_PATH,
        d.ADMIN_CONF_PATH,
      ])
        expect(covered(p), p).toBe(true);
    });

    it('ships the ConfigMaps it mounts', () => {
      const cfg = find('ConfigMap', 'join-config');
      expect(JSON.parse(cfg.data.attestationConfig).measurements['15'].warnOnly).toBe(false);
      expect(Buffer.from(cfg.binaryData.measurementSalt, 'base64')).toHaveLength(32);
      expect(JSON.parse(find('ConfigMap', 'join-denylist').data['denylist.json'])).toEqual({ nodes: [] });
    });
  });

  describe('key service', () => {
    const dep = find('Deployment', 'key-service');
    const c = dep.spec.template.spec.containers[0];
    const args = argsOf(c);

    it('listens on the default port with probes on it', () => {
      expect(args.listen).toBe(`0.0.0.0:${d.KEY_SERVICE_PORT}`);
      expect(c.ports[0].containerPort).toBe(d.KEY_SERVICE_PORT);
      expect(c.livenessProbe.tcpSocket.port).toBe(d.KEY_SERVICE_PORT);
      expect(c.readinessProbe.tcpSocket.port).toBe(d.KEY_SERVICE_PORT);
      expect(find('Service', 'key-service').spec.ports[0].targetPort).toBe(d.KEY_SERVICE_PORT);
    });

    it('reads the master secret and salt from the mounted paths', () => {
      expect(args['master-secret-file']).toBe(d.MASTER_SECRET_PATH);
      expect(args['salt-file']).toBe(d.SALT_PATH);
      expect(c.volumeMounts[0].mountPath).toBe(d.SERVICE_BASE_PATH);
    });
  });

  it('the Dockerfile is multi-stage and runs the built CLI', () => {
    const df = readFileSync(resolve(import.meta.dirname, '../../deploy/Dockerfile'), 'utf8');
    expect(df.match(/^FROM /gm)?.length).toBeGreaterThanOrEqual(2);
    expect(df).toContain('dist/src/app/cli/main.js');
  });
});
