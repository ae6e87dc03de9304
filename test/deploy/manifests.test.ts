/**
 * The generator's objects (src/app/manifests/manifests.ts) for every cloud and variant the code
 * lists, which every overlay of deploy/kubernetes renders to (kustomize.test.ts): every object must
 * validate against Kubernetes' OpenAPI schemas (offline, strict about unknown fields), and the
 * manifests must agree with the code: ports, probe paths, mount paths, and flags the real CLI
 * parsers accept.
 */
import { createPrivateKey } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative, resolve } from 'node:path';
import { Writable } from 'node:stream';
import { afterAll, describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import {
  JOIN_SERVICE_CLIENT_TLS_SECRET,
  KEY_SERVICE_TLS_SECRET,
  keyServiceDnsNames,
} from '../../src/adapters/pki/key-service-tls.js';
import { parseJoinServiceFlags } from '../../src/app/cli/join-service-flags.js';
import { keyServiceCommand } from '../../src/app/cli/key-service.js';
import { runManifests } from '../../src/app/cli/manifests.js';
import { nodeOperatorCommand, reattestationSettings } from '../../src/app/cli/node-operator.js';
import * as d from '../../src/app/defaults.js';
import {
  AK_REGISTRY_PATH,
  DEFAULT_IMAGE,
  JOIN_SERVICE_MEMORY_MIB,
  KEY_SERVICE_CLIENT_TLS_DIR,
  KEY_SERVICE_TLS_DIR,
} from '../../src/app/manifests/common.js';
import { pkiCopyArgs } from '../../src/app/manifests/join-service.js';
import { deployTargets, renderManifests } from '../../src/app/manifests/manifests.js';
import { parseCommand } from '../../src/app/program/args.js';
import { parseOptions } from '../../src/app/program/options.js';
import { cloudNames, cloudVariants, variantEntry } from '../../src/app/registry/index.js';
import { parseAttestationConfig } from '../../src/domain/measurements.js';
import { CONTROL_PLANE_FILE_NAMES } from '../../src/ports/kubernetes-node.js';
import type { Variant } from '../../src/ports/variant.js';
import { validateObject } from './k8s-schema.js';

const root = resolve(import.meta.dirname, '../..');
const dir = resolve(root, 'deploy/kubernetes');
// biome-ignore lint/suspicious/noExplicitAny: manifests are untyped YAML
type Obj = any;

const parse = (text: string): Obj[] => parseAllDocuments(text).map((doc) => doc.toJS());
const listFiles = (base: string): string[] => listAll(base);
const nameOf = (t: { cloud: string; variant: string }) => `${t.cloud}/${t.variant}`;
const argsOf = (c: Obj): Record<string, string> =>
  Object.fromEntries(
    (c.args as string[])
      .filter((a) => a.startsWith('--'))
      .map((a) => {
        const i = a.indexOf('=');
        return [a.slice(2, i), a.slice(i + 1)] as [string, string];
      }),
  );
const matches = (selector: Record<string, string>, labels: Record<string, string>) =>
  Object.entries(selector).every(([k, v]) => labels[k] === v);

const targets = deployTargets();

describe('deploy targets', () => {
  it('cover every cloud the join service runs on, with the variants of the registries', () => {
    expect(new Set(targets.map((t) => t.cloud))).toEqual(new Set(cloudNames()));
    for (const t of targets) expect(cloudVariants(t.cloud)).toContain(t.variant);
    expect(targets.length).toBeGreaterThanOrEqual(cloudNames().length);
  });
});

describe('schema validation', () => {
  it('every object of every rendered file validates against the Kubernetes OpenAPI schemas', async () => {
    let count = 0;
    for (const t of targets) {
      for (const o of parse(renderManifests(t))) {
        expect(await validateObject(o), `${nameOf(t)}: ${o.kind}/${o.metadata?.name}`).toEqual([]);
        count++;
      }
    }
    expect(count).toBeGreaterThanOrEqual(targets.length * 10);
  });

  // A planted typo must fail: the validator is not a test that cannot fail.
  const deployment = (): Obj =>
    parse(renderManifests(targets[0] as (typeof targets)[0])).find((o) => o.kind === 'Deployment');

  it('refuses a misspelt required field (contianers)', async () => {
    const o = deployment();
    const spec = o.spec.template.spec;
    spec.contianers = spec.containers;
    delete spec.containers;
    const errors = await validateObject(o);
    expect(errors.join('\n')).toMatch(/containers/);
    expect(errors.join('\n')).toMatch(/unknown field "contianers"/);
  });

  it('refuses a wrong type (replicas: "2")', async () => {
    const o = deployment();
    o.spec.replicas = '2';
    expect((await validateObject(o)).join('\n')).toMatch(/replicas must be integer/);
  });

  it('refuses a misspelt optional field (livenesProbe), as strict field validation does', async () => {
    const o = deployment();
    const c = o.spec.template.spec.containers[0];
    c.livenesProbe = c.livenessProbe;
    delete c.livenessProbe;
    expect(await validateObject(o)).toEqual([
      '/spec/template/spec/containers/0: unknown field "livenesProbe" in V1Container',
    ]);
  });

  it('refuses a wrong type deep inside (a port as an object) and an unknown kind', async () => {
    const o = deployment();
    o.spec.template.spec.containers[0].ports[0].containerPort = { port: 9000 };
    expect((await validateObject(o)).join('\n')).toMatch(/containerPort must be integer/);
    expect(await validateObject({ apiVersion: 'apps/v1', kind: 'Deployement', metadata: {} })).toEqual([
      'no schema for apps/v1 Deployement',
    ]);
  });
});

describe.each(targets)('manifests for $cloud / $variant', (target) => {
  const docs = parse(renderManifests(target));
  const find = (kind: string, name: string): Obj => {
    const o = docs.find((x) => x?.kind === kind && x?.metadata?.name === name);
    if (!o) throw new Error(`no ${kind}/${name} in ${nameOf(target)}`);
    return o;
  };
  const ds = find('DaemonSet', 'join-service');
  const jc = ds.spec.template.spec.containers[0];
  const jargs = argsOf(jc);
  const dep = find('Deployment', 'key-service');
  const kc = dep.spec.template.spec.containers[0];
  const kargs = argsOf(kc);

  it('puts every namespaced object in kube-system; only the CRD and the ClusterRole(Binding) are cluster-scoped', () => {
    const clusterScoped = ['CustomResourceDefinition', 'ClusterRole', 'ClusterRoleBinding'];
    for (const o of docs)
      expect(o.metadata.namespace, `${o.kind}/${o.metadata.name}`).toBe(
        clusterScoped.includes(o.kind) ? undefined : 'kube-system',
      );
  });

  it('passes flags the real join-service and key-service parsers accept, for this cloud and variant', () => {
    expect(jc.args[0]).toBe('join-service');
    const flags = parseJoinServiceFlags(jc.args.slice(1));
    expect(flags).toMatchObject({ cloud: { cloud: target.cloud }, attestation: { variant: target.variant } });
    expect(kc.args[0]).toBe('key-service');
    expect(parseCommand(kc.args.slice(1), keyServiceCommand)).toBeDefined();
    expect(jc.image).toBe(DEFAULT_IMAGE);
  });

  it("keeps the caller's source IP (externalTrafficPolicy Local) and runs on every control plane", () => {
    const svc = find('Service', 'join-service');
    expect(svc.spec.externalTrafficPolicy).toBe('Local');
    expect(ds.spec.template.spec.nodeSelector).toHaveProperty(['node-role.kubernetes.io/control-plane']);
  });

  it('listens where the code defaults say and the NodePort forwards there', () => {
    expect(jargs.listen).toBe(`0.0.0.0:${d.JOIN_SERVICE_PORT}`);
    expect(jargs['http-listen']).toBe(`0.0.0.0:${d.JOIN_SERVICE_HTTP_PORT}`);
    expect(jc.ports.map((p: Obj) => p.containerPort)).toEqual([
      d.JOIN_SERVICE_PORT,
      d.JOIN_SERVICE_HTTP_PORT,
    ]);
    const svc = find('Service', 'join-service');
    expect(svc.spec.type).toBe('NodePort');
    expect(svc.spec.ports[0]).toMatchObject({
      nodePort: d.JOIN_SERVICE_PORT,
      targetPort: d.JOIN_SERVICE_PORT,
    });
    expect(jargs['key-service-endpoint']).toBe(`key-service.kube-system:${d.KEY_SERVICE_PORT}`);
  });

  it('wires the probes to the health endpoints', () => {
    expect(jc.livenessProbe.httpGet).toEqual({ path: '/healthz', port: d.JOIN_SERVICE_HTTP_PORT });
    expect(jc.startupProbe.httpGet).toEqual({ path: '/healthz', port: d.JOIN_SERVICE_HTTP_PORT });
    expect(jc.readinessProbe.httpGet).toEqual({ path: '/readyz', port: d.JOIN_SERVICE_HTTP_PORT });
    expect(kc.livenessProbe.tcpSocket.port).toBe(d.KEY_SERVICE_PORT);
    expect(kc.readinessProbe.tcpSocket.port).toBe(d.KEY_SERVICE_PORT);
  });

  it("sizes the join service's memory request and limit to its memory budget", () => {
    expect(jc.resources.requests.memory).toBe(`${JOIN_SERVICE_MEMORY_MIB}Mi`);
    expect(jc.resources.limits.memory).toBe(`${JOIN_SERVICE_MEMORY_MIB}Mi`);
    for (const c of [jc, kc]) {
      expect(c.resources.requests.cpu).toBeTruthy();
      expect(c.resources.limits.memory).toBe(c.resources.requests.memory);
    }
  });

  it('mounts the files its flags name', () => {
    const mounts: string[] = jc.volumeMounts.map((m: Obj) => m.mountPath);
    const covered = (p: string) => mounts.some((m) => p.startsWith(`${m}/`));
    expect(jargs['attestation-config']).toBe(d.ATTESTATION_CONFIG_PATH);
    expect(jargs['measurement-salt-file']).toBe(d.MEASUREMENT_SALT_PATH);
    expect(jargs['deny-list']).toBe(d.DENY_LIST_PATH);
    const files = [
      d.ATTESTATION_CONFIG_PATH,
      d.MEASUREMENT_SALT_PATH,
      d.DENY_LIST_PATH,
      ...CONTROL_PLANE_FILE_NAMES.map((f) => `${d.PKI_DIR}/${f}`),
    ];
    if (jargs['azure-ak-roots'] !== undefined) files.push(jargs['azure-ak-roots']);
    if (jargs['qemu-ak-registry'] !== undefined) files.push(jargs['qemu-ak-registry']);
    for (const p of files) expect(covered(p), p).toBe(true);
    // Files under the projected config volume are keys of the join config.
    const cfg = find('ConfigMap', 'join-config');
    for (const p of files.filter(
      (f) =>
        f.startsWith(`${d.SERVICE_BASE_PATH}/`) && !f.includes('/denylist/') && !f.includes('/ak-registry/'),
    )) {
      const key = p.slice(d.SERVICE_BASE_PATH.length + 1);
      expect({ ...cfg.data, ...cfg.binaryData }, p).toHaveProperty([key]);
    }
  });

  it("the node operator's args parse with its command table, re-attest this variant with the join service's lookups, and name mounted keys of join-config", () => {
    const op = find('Deployment', 'node-operator').spec.template.spec;
    const oc = op.containers[0];
    expect(oc.args[0]).toBe('node-operator');
    const values = parseOptions(oc.args.slice(1), nodeOperatorCommand);
    const settings = values === undefined ? undefined : reattestationSettings(values);
    expect(settings).toMatchObject({
      variant: target.variant,
      attestationConfigPath: d.ATTESTATION_CONFIG_PATH,
    });
    const oargs = argsOf(oc);
    // The same AK trust and lookups as the join service.
    for (const flag of ['qemu-ak-registry', 'azure-ak-roots', 'tdx-collateral'])
      expect(oargs[flag], flag).toBe(jargs[flag]);
    const vtpm = variantEntry(target.variant).kind === 'vtpm';
    expect(oargs['cluster-id-file']).toBe(vtpm ? d.CLUSTER_ID_PATH : undefined);
    const cfg = find('ConfigMap', 'join-config');
    const mounts = oc.volumeMounts as Obj[];
    for (const path of [d.ATTESTATION_CONFIG_PATH, oargs['cluster-id-file'], oargs['azure-ak-roots']].filter(
      (p) => p !== undefined,
    )) {
      const mount = mounts.find((m) => path.startsWith(`${m.mountPath}/`));
      expect(op.volumes.find((v: Obj) => v.name === mount?.name)?.configMap?.name, path).toBe('join-config');
      expect(cfg.data, path).toHaveProperty([path.slice(d.SERVICE_BASE_PATH.length + 1)]);
    }
  });

  it('takes every environment value from a key its ConfigMap holds', () => {
    for (const c of [jc, kc, find('Deployment', 'node-operator').spec.template.spec.containers[0]])
      for (const e of (c.env ?? []) as Obj[]) {
        const ref = e.valueFrom?.configMapKeyRef;
        if (ref === undefined) continue;
        expect(find('ConfigMap', ref.name).data, `${c.name} ${e.name}`).toHaveProperty([ref.key]);
      }
    const endpointEnv = (jc.env as Obj[]).find((e) => e.name === 'CONFBOOT_CLOUD_API_ENDPOINT');
    expect(endpointEnv !== undefined, 'the join service reads the cloud API endpoint from join-config').toBe(
      target.cloud === 'openstack',
    );
    expect(jargs['cloud-api-endpoint']).toBeUndefined();
  });

  it('never trusts an attestation key as carried: qemu-vtpm checks the registered AKs (empty: nobody yet)', () => {
    expect(jargs['trust-ak-as-carried']).toBeUndefined();
    expect(parseJoinServiceFlags(jc.args.slice(1))?.attestation.trustAkAsCarried).toBe(false);
    if (target.variant !== 'qemu-vtpm') {
      expect(jargs['qemu-ak-registry']).toBeUndefined();
      return;
    }
    expect(jargs['qemu-ak-registry']).toBe(AK_REGISTRY_PATH);
    const registry = find('ConfigMap', 'join-ak-registry');
    expect(JSON.parse(registry.data['ak-registry.json'])).toEqual({});
    // The deepest mount holding the file (it sits inside the config mount).
    const mount = jc.volumeMounts
      .filter((m: Obj) => AK_REGISTRY_PATH.startsWith(`${m.mountPath}/`))
      .sort((a: Obj, b: Obj) => b.mountPath.length - a.mountPath.length)[0];
    const volume = ds.spec.template.spec.volumes.find((v: Obj) => v.name === mount?.name);
    expect(volume?.configMap?.name).toBe('join-ak-registry');
  });

  it('mounts only the pki files it reads, never admin.conf or /etc/kubernetes, readable by the user it runs as', () => {
    const pod = ds.spec.template.spec;
    // No --admin-conf: the discovery hash comes from <pki-dir>/ca.crt.
    expect(jargs['admin-conf']).toBeUndefined();
    expect(parseJoinServiceFlags(jc.args.slice(1))?.cluster.adminConf).toBeUndefined();
    // The service itself mounts no host path at all; the pki volume is memory-backed.
    const volume = (name: string) => pod.volumes.find((v: Obj) => v.name === name);
    for (const m of jc.volumeMounts) expect(volume(m.name).hostPath, m.name).toBeUndefined();
    const pkiMount = jc.volumeMounts.find((m: Obj) => m.mountPath === d.PKI_DIR);
    expect(pkiMount.readOnly).toBe(true);
    expect(volume(pkiMount.name).emptyDir).toEqual({ medium: 'Memory', sizeLimit: '1Mi' });
    expect(jc.securityContext).toMatchObject({ runAsNonRoot: true, runAsUser: 65532, runAsGroup: 65532 });
    // The one host path is kubeadm's pki directory, read-only, in the init container only.
    const hostPaths = pod.volumes.filter((v: Obj) => v.hostPath).map((v: Obj) => v.hostPath.path);
    expect(hostPaths).toEqual([d.PKI_DIR]);
    expect(JSON.stringify(ds)).not.toContain('admin.conf');
    const [init, ...more] = pod.initContainers;
    expect(more).toEqual([]);
    expect(init.volumeMounts).toEqual([
      { name: 'host-pki', mountPath: '/host-pki', readOnly: true },
      { name: pkiMount.name, mountPath: d.PKI_DIR },
    ]);
    expect(init.securityContext).toMatchObject({
      runAsUser: 0,
      allowPrivilegeEscalation: false,
      readOnlyRootFilesystem: true,
      capabilities: { drop: ['ALL'], add: ['CHOWN', 'FOWNER'] },
    });
    // The image's entrypoint (the confboot CLI) runs copy-pki: no shell (test/app/cli/copy-pki.test.ts).
    expect(init.command).toBeUndefined();
    expect(init.args).toEqual(pkiCopyArgs());
  });

  it('ships an attestation config that enforces every measurement it lists, and the other ConfigMaps', () => {
    const cfg = find('ConfigMap', 'join-config');
    const { measurements } = parseAttestationConfig(cfg.data.attestationConfig);
    expect(measurements.size).toBeGreaterThan(0);
    for (const m of measurements.values()) expect(m.warnOnly).toBe(false);
    expect(Buffer.from(cfg.binaryData.measurementSalt, 'base64')).toHaveLength(32);
    expect(JSON.parse(find('ConfigMap', 'join-denylist').data['denylist.json'])).toEqual({ nodes: [] });
  });

  it('reads the master secret and salt from the mounted paths', () => {
    expect(kargs.listen).toBe(`0.0.0.0:${d.KEY_SERVICE_PORT}`);
    expect(kc.ports[0].containerPort).toBe(d.KEY_SERVICE_PORT);
    expect(find('Service', 'key-service').spec.ports[0].targetPort).toBe(d.KEY_SERVICE_PORT);
    expect(kargs['master-secret-file']).toBe(d.MASTER_SECRET_PATH);
    expect(kargs['salt-file']).toBe(d.SALT_PATH);
    expect(kc.volumeMounts[0].mountPath).toBe(d.SERVICE_BASE_PATH);
  });

  it('lets only join-service pods reach the key service, and the key service reach nothing', () => {
    const policies = docs.filter((o) => o.kind === 'NetworkPolicy');
    const keyPods = dep.spec.template.metadata.labels;
    const joinPods = ds.spec.template.metadata.labels;
    // The policies that select the key-service pods decide who reaches them.
    const selecting = policies.filter((p) => matches(p.spec.podSelector.matchLabels, keyPods));
    expect(selecting).toHaveLength(1);
    const [policy] = selecting;
    expect(policy.spec.podSelector.matchExpressions).toBeUndefined();
    expect(policy.spec.policyTypes).toEqual(['Ingress', 'Egress']);
    expect(policy.spec.egress).toEqual([]);
    /** Whether a pod with `labels` in `namespace` may open `port` on a key-service pod. */
    const admitted = (labels: Record<string, string>, namespace: string, port: number) =>
      (policy.spec.ingress as Obj[]).some(
        (rule) =>
          (rule.ports ?? [{}]).some((p: Obj) => p.port === undefined || p.port === port) &&
          (rule.from ?? []).some(
            (peer: Obj) =>
              peer.ipBlock === undefined &&
              peer.namespaceSelector === undefined &&
              namespace === policy.metadata.namespace &&
              matches(peer.podSelector?.matchLabels ?? {}, labels) &&
              peer.podSelector?.matchExpressions === undefined,
          ),
      );
    expect(admitted(joinPods, 'kube-system', d.KEY_SERVICE_PORT)).toBe(true);
    expect(admitted(joinPods, 'kube-system', 22)).toBe(false);
    expect(admitted({ app: 'anything-else' }, 'kube-system', d.KEY_SERVICE_PORT)).toBe(false);
    expect(admitted({}, 'kube-system', d.KEY_SERVICE_PORT)).toBe(false);
    expect(admitted(keyPods, 'kube-system', d.KEY_SERVICE_PORT)).toBe(false);
    expect(admitted(joinPods, 'default', d.KEY_SERVICE_PORT)).toBe(false);
    // Every rule names its peers: none admits all sources.
    for (const rule of policy.spec.ingress) expect(rule.from?.length).toBeGreaterThan(0);
  });

  it('connects the join service to the key service with mutual TLS from the two Secrets', () => {
    const mountOf = (pod: Obj, c: Obj, dir: string): Obj => {
      const m = c.volumeMounts.find((x: Obj) => x.mountPath === dir);
      return pod.volumes.find((v: Obj) => v.name === m?.name);
    };
    const keyPod = dep.spec.template.spec;
    expect(parseCommand(kc.args.slice(1), keyServiceCommand)).toMatchObject({
      'tls-cert': `${KEY_SERVICE_TLS_DIR}/tls.crt`,
      'tls-key': `${KEY_SERVICE_TLS_DIR}/tls.key`,
      'client-ca': `${KEY_SERVICE_TLS_DIR}/ca.crt`,
    });
    expect(mountOf(keyPod, kc, KEY_SERVICE_TLS_DIR).secret.secretName).toBe(KEY_SERVICE_TLS_SECRET);
    expect(parseJoinServiceFlags(jc.args.slice(1))?.keyService).toMatchObject({
      ca: `${KEY_SERVICE_CLIENT_TLS_DIR}/ca.crt`,
      cert: `${KEY_SERVICE_CLIENT_TLS_DIR}/tls.crt`,
      key: `${KEY_SERVICE_CLIENT_TLS_DIR}/tls.key`,
    });
    expect(mountOf(ds.spec.template.spec, jc, KEY_SERVICE_CLIENT_TLS_DIR).secret.secretName).toBe(
      JOIN_SERVICE_CLIENT_TLS_SECRET,
    );
    // The server certificate carries the name the join service dials.
    expect(keyServiceDnsNames('kube-system')).toContain(jargs['key-service-endpoint']?.split(':')[0]);
    // Secret files: owner and the pod's group only, and the pod's group is the image's user.
    for (const pod of [keyPod, ds.spec.template.spec]) {
      for (const v of pod.volumes.filter((x: Obj) => x.secret)) expect(v.secret.defaultMode).toBe(0o440);
      expect(pod.securityContext.fsGroup).toBe(65532);
    }
  });

  it('has PodDisruptionBudgets that select the workloads and allow one voluntary disruption', () => {
    const joinPdb = find('PodDisruptionBudget', 'join-service');
    expect(matches(joinPdb.spec.selector.matchLabels, ds.spec.template.metadata.labels)).toBe(true);
    // A DaemonSet has no scale subresource: only an integer minAvailable works for its pods.
    expect(joinPdb.spec.minAvailable).toBe(1);
    expect(joinPdb.spec.maxUnavailable).toBeUndefined();
    const keyPdb = find('PodDisruptionBudget', 'key-service');
    expect(matches(keyPdb.spec.selector.matchLabels, dep.spec.template.metadata.labels)).toBe(true);
    expect(keyPdb.spec.maxUnavailable).toBe(1);
    expect(dep.spec.replicas).toBeGreaterThan(keyPdb.spec.maxUnavailable);
  });
});

describe('confboot manifests', () => {
  const tmp = mkdtempSync(join(tmpdir(), 'confboot-manifests-'));
  afterAll(() => rmSync(tmp, { recursive: true, force: true }));
  const capture = () => {
    const chunks: string[] = [];
    const out = new Writable({
      write(chunk, _enc, cb) {
        chunks.push(String(chunk));
        cb();
      },
    });
    return { out, text: () => chunks.join('') };
  };

  it("prints the cloud's default variant without --variant, and another image with --image", async () => {
    const { out, text } = capture();
    expect(await runManifests(['--cloud', 'gcp', '--image', 'registry.example/confboot:dev'], out)).toBe(0);
    const variant = cloudVariants('gcp')[0] as Variant;
    expect(text()).toBe(renderManifests({ cloud: 'gcp', variant, image: 'registry.example/confboot:dev' }));
    expect(text()).toContain(`--attestation-variant=${variant}`);
    expect(text()).not.toContain(DEFAULT_IMAGE);
  });

  it('--all --out writes exactly the committed tree', async () => {
    const stderr = process.stderr.write;
    process.stderr.write = (() => true) as typeof process.stderr.write;
    try {
      expect(await runManifests(['--all', '--out', tmp])).toBe(0);
    } finally {
      process.stderr.write = stderr;
    }
    expect(listFiles(tmp)).toEqual(listFiles(dir));
    for (const f of listFiles(dir)) expect(readFileSync(join(tmp, f)), f).toEqual(readFileSync(join(dir, f)));
  });

  it('--tls-secrets prints two valid Secrets with fresh material, --plain-key-service drops mutual TLS', async () => {
    const a = capture();
    const b = capture();
    expect(await runManifests(['--tls-secrets', '--tls-validity-days', '30'], a.out)).toBe(0);
    expect(await runManifests(['--tls-secrets'], b.out)).toBe(0);
    const secrets = parse(a.text());
    expect(secrets.map((o) => `${o.kind}/${o.metadata.name}`)).toEqual([
      `Secret/${KEY_SERVICE_TLS_SECRET}`,
      `Secret/${JOIN_SERVICE_CLIENT_TLS_SECRET}`,
    ]);
    for (const o of secrets) expect(await validateObject(o)).toEqual([]);
    expect(a.text()).not.toBe(b.text());
    expect(secrets[0].stringData['ca.crt']).toBe(secrets[1].stringData['ca.crt']);

    const plain = capture();
    expect(await runManifests(['--cloud', 'qemu', '--plain-key-service'], plain.out)).toBe(0);
    const docs = parse(plain.text());
    for (const o of docs) expect(await validateObject(o)).toEqual([]);
    expect(plain.text()).not.toMatch(/--tls-cert|--key-service-ca|key-service-tls/);
    await expect(runManifests(['--tls-secrets', '--cloud', 'qemu'])).rejects.toThrow(/leave out --cloud/);
    await expect(runManifests(['--tls-secrets', '--tls-validity-days', '0'])).rejects.toThrow(
      /--tls-validity: want a duration of at least 1d/,
    );
  });

  it('--receipt-key-secret prints a valid Secret with a fresh P-256 receipt key the join service mounts', async () => {
    const a = capture();
    const b = capture();
    expect(await runManifests(['--receipt-key-secret'], a.out)).toBe(0);
    expect(await runManifests(['--receipt-key-secret'], b.out)).toBe(0);
    const [secret, ...rest] = parse(a.text());
    expect(rest).toEqual([]);
    expect(await validateObject(secret)).toEqual([]);
    expect(`${secret.kind}/${secret.metadata.namespace}/${secret.metadata.name}`).toBe(
      'Secret/kube-system/join-service-receipt-key',
    );
    const pem = Buffer.from(secret.data['key.pem'], 'base64').toString();
    expect(createPrivateKey(pem).asymmetricKeyDetails?.namedCurve).toBe('prime256v1');
    expect(a.text()).not.toBe(b.text());
    // The DaemonSet mounts that Secret and passes the key file to the service.
    const ds = parse(renderManifests({ cloud: 'qemu', variant: 'qemu-vtpm' })).find(
      (o) => o.kind === 'DaemonSet',
    );
    const volume = ds.spec.template.spec.volumes.find((v: { name: string }) => v.name === 'receipt-key');
    expect(volume.secret.secretName).toBe('join-service-receipt-key');
    expect(ds.spec.template.spec.containers[0].args).toContain(
      '--receipt-key=/etc/confboot/receipt-key/key.pem',
    );
    await expect(runManifests(['--receipt-key-secret', '--cloud', 'qemu'])).rejects.toThrow(
      /leave out --cloud/,
    );
  });

  it('--cloud-api-endpoint puts the Nova endpoint into join-config; a URL that is not https is refused', async () => {
    const { out, text } = capture();
    await runManifests(
      ['--cloud', 'openstack', '--cloud-api-endpoint', 'https://nova.example:8774/v2.1'],
      out,
    );
    const cfg = parse(text()).find((o) => o?.kind === 'ConfigMap' && o.metadata.name === 'join-config');
    expect(cfg.data.cloudApiEndpoint).toBe('https://nova.example:8774/v2.1\n');
    await expect(
      runManifests(['--cloud', 'openstack', '--cloud-api-endpoint', 'http://nova.example/v2.1']),
    ).rejects.toThrow('--cloud-api-endpoint: want an https URL, got "http://nova.example/v2.1"');
  });

  it('refuses an unknown cloud, a variant of another cloud and --all without --out', async () => {
    await expect(runManifests(['--cloud', 'nimbus'])).rejects.toThrow(
      /--cloud: want one of gcp, azure, aws, qemu, openstack, got/,
    );
    await expect(runManifests(['--cloud', 'gcp', '--variant', 'azure-tdx'])).rejects.toThrow(
      /--variant: cloud gcp has gcp-sev-es/,
    );
    await expect(runManifests(['--all'])).rejects.toThrow(/--all needs --out/);
    await expect(runManifests([])).rejects.toThrow(/missing --cloud/);
  });
});

/** Files (not directories) under `base`, relative, sorted. */
function listAll(base: string): string[] {
  return readdirSync(base, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => relative(base, join(e.parentPath, e.name)))
    .sort();
}
