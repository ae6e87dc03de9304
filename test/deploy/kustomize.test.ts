/**
 * deploy/kubernetes: the kustomize base and one overlay per cloud and variant, as the generator
 * writes them (src/app/manifests/kustomize.ts). The tree must be current, hold no `REPLACE:`
 * placeholder, and every overlay must render with the real `kubectl kustomize` to exactly the
 * objects `confboot manifests --cloud C --variant V` prints, each valid against Kubernetes' OpenAPI
 * schemas. The kubectl on PATH renders them (kubectl 1.32 has kustomize v5.5.0; Debian's
 * kubernetes-client 1.20, which scripts/setup.sh installs when none is present, has v2.0.3); a
 * second kubectl named by CONFBOOT_KUBECTL_OLD (for example 1.20's, unpacked from its .deb) renders
 * them too.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { runManifests } from '../../src/app/cli/manifests.js';

import { overlayDir, renderKustomizeTree } from '../../src/app/manifests/kustomize.js';
import { deployTargets, renderManifests, renderObjects } from '../../src/app/manifests/manifests.js';
import { AMD_ARK_MILAN_PEM, INTEL_SGX_ROOT_CA_PEM } from '../../src/app/registry/trust-anchors.js';
import { validateObject } from './k8s-schema.js';

// biome-ignore lint/suspicious/noExplicitAny: Kubernetes objects are untyped YAML here
type Obj = any;

const root = resolve(import.meta.dirname, '../..');
const dir = resolve(root, 'deploy/kubernetes');
const targets = deployTargets();
const tmp = mkdtempSync(join(tmpdir(), 'confboot-kustomize-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

const listAll = (base: string): string[] =>
  readdirSync(base, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => relative(base, join(e.parentPath, e.name)))
    .sort();

/** kubectl binaries to render with: the one on PATH, and CONFBOOT_KUBECTL_OLD when set. */
const kubectls = ['kubectl', ...(process.env.CONFBOOT_KUBECTL_OLD ? [process.env.CONFBOOT_KUBECTL_OLD] : [])];
const kustomizeVersion = (kubectl: string): string => {
  let out: string;
  try {
    out = execFileSync(kubectl, ['version', '--client'], { encoding: 'utf8', timeout: 30_000 });
  } catch (err) {
    throw new Error(`${kubectl} does not run (scripts/setup.sh installs Debian's kubernetes-client): ${err}`);
  }
  // 1.20 prints no kustomize version; its kubectl kustomize is v2.0.3.
  return (
    /Kustomize Version: (\S+)/.exec(out)?.[1] ?? (/GitVersion:"v1\.20\./.test(out) ? 'v2.0.3' : 'unknown')
  );
};
const kustomize = (kubectl: string, path: string): Obj[] =>
  parseAllDocuments(
    execFileSync(kubectl, ['kustomize', path], {
      encoding: 'utf8',
      timeout: 60_000,
      stdio: ['ignore', 'pipe', 'pipe'],
    }),
  ).map((d) => d.toJS());

const MERGE_KEYS: Record<string, string> = {
  containers: 'name',
  initContainers: 'name',
  volumes: 'name',
  env: 'name',
  volumeMounts: 'mountPath',
};
/**
 * An object as the API stores it, for comparison: keyed lists in key order (a strategic merge
 * patch may reorder them; the API does not care), ConfigMap data and binaryData as one map of
 * bytes (kustomize decides between them by UTF-8 validity).
 */
function normalise(value: Obj, field?: string): Obj {
  if (Array.isArray(value)) {
    const items = value.map((v) => normalise(v));
    const key = field === undefined ? undefined : MERGE_KEYS[field];
    return key === undefined ? items : items.sort((a, b) => String(a[key]).localeCompare(String(b[key])));
  }
  if (typeof value !== 'object' || value === null) return value;
  const out: Obj = {};
  for (const [k, v] of Object.entries(value)) if (v !== undefined) out[k] = normalise(v, k);
  if (out.kind === 'ConfigMap') {
    const bytes: Record<string, string> = {};
    for (const [k, v] of Object.entries(out.data ?? {})) bytes[k] = Buffer.from(v as string).toString('hex');
    for (const [k, v] of Object.entries(out.binaryData ?? {}))
      bytes[k] = Buffer.from(v as string, 'base64').toString('hex');
    delete out.data;
    delete out.binaryData;
    out.bytes = bytes;
  }
  return out;
}
const byId = (objects: Obj[]): Obj[] =>
  objects
    .map((o) => normalise(o))
    .sort((a, b) => `${a.kind}/${a.metadata.name}`.localeCompare(`${b.kind}/${b.metadata.name}`));
const expected = (t: (typeof targets)[0]): Obj[] =>
  byId(renderObjects(t).map((r) => JSON.parse(JSON.stringify(r.object))));

const LABELS = ['name', 'instance', 'version', 'component', 'part-of', 'managed-by'].map(
  (l) => `app.kubernetes.io/${l}`,
);

describe('deploy/kubernetes', () => {
  it('is exactly the generator output: a base and one overlay per cloud and variant (regenerate: confboot manifests --all --out deploy/kubernetes)', () => {
    const files = renderKustomizeTree();
    expect(listAll(dir)).toEqual(files.map((f) => f.path).sort());
    for (const f of files) expect(readFileSync(join(dir, f.path)), f.path).toEqual(Buffer.from(f.content));
    const overlays = readdirSync(join(dir, 'overlays')).sort();
    expect(overlays).toEqual(targets.map((t) => overlayDir(t).slice('overlays/'.length)).sort());
    expect(overlays.length).toBeGreaterThanOrEqual(10);
  });

  it('holds no REPLACE: placeholder, in the tree or in what it renders', () => {
    for (const f of listAll(resolve(root, 'deploy')))
      expect(readFileSync(resolve(root, 'deploy', f), 'latin1'), f).not.toContain('REPLACE:');
    for (const t of targets) expect(renderManifests(t)).not.toContain('REPLACE:');
  });

  it('names the published SEV-SNP and TDX roots in their attestation configs', () => {
    const config = readFileSync(join(dir, 'overlays/gcp-gcp-sev-snp/attestation-config.json'), 'utf8');
    expect(JSON.parse(config).amdRootKey).toBe(AMD_ARK_MILAN_PEM);
    const tdx = readFileSync(join(dir, 'overlays/qemu-qemu-tdx/attestation-config.json'), 'utf8');
    expect(JSON.parse(tdx).intelRootKey).toBe(INTEL_SGX_ROOT_CA_PEM);
  });
});

describe.each(kubectls)('kubectl kustomize with %s', (kubectl) => {
  it('is installed (scripts/setup.sh installs Debian’s kubernetes-client when no kubectl is present)', () => {
    expect(kustomizeVersion(kubectl)).toMatch(/^v\d/);
  });

  describe.each(targets)('overlays/$cloud-$variant', (target) => {
    const rendered = (): Obj[] => kustomize(kubectl, join(dir, overlayDir(target)));

    it('renders exactly the objects of confboot manifests for this cloud and variant, each valid against the schemas', async () => {
      const objects = rendered();
      expect(byId(objects)).toEqual(expected(target));
      for (const o of objects) expect(await validateObject(o), `${o.kind}/${o.metadata?.name}`).toEqual([]);
    });

    it('labels every object with app.kubernetes.io/*, runs every pod (join service, key service, node operator) with the RuntimeDefault seccomp profile, and carries every CRD', () => {
      const objects = rendered();
      for (const o of objects)
        for (const l of LABELS)
          expect(o.metadata.labels?.[l], `${o.kind}/${o.metadata.name} ${l}`).toBeTruthy();
      const pods = objects.filter((o) => o.spec?.template?.spec).map((o) => o.spec.template);
      expect(pods.map((p) => p.metadata.labels['app.kubernetes.io/name']).sort()).toEqual([
        'join-service',
        'key-service',
        'node-operator',
      ]);
      for (const p of pods) expect(p.spec.securityContext.seccompProfile).toEqual({ type: 'RuntimeDefault' });
      expect(
        objects
          .filter((o) => o.kind === 'CustomResourceDefinition')
          .map((o) => o.metadata.name)
          .sort(),
      ).toEqual([
        'diskbindings.confboot.dev',
        'evidencerecords.confboot.dev',
        'joiningnodes.update.edgeless.systems',
        'nodeversions.update.edgeless.systems',
      ]);
      const key = objects.find((o) => o.kind === 'Deployment').spec.template.spec.containers[0];
      expect(key.readinessProbe.tcpSocket.port).toBe(9000);
    });
  });

  it('--image with a digest: every container of every overlay runs that image', async () => {
    const image = `ghcr.io/confboot/confboot@sha256:${'ab'.repeat(32)}`;
    const out = join(tmp, `digest-${kubectls.indexOf(kubectl)}`);
    await quietly(() => runManifests(['--all', '--out', out, '--image', image]));
    for (const t of targets) {
      const images = kustomize(kubectl, join(out, overlayDir(t)))
        .filter((o) => o.spec?.template?.spec)
        .flatMap((o) => [...(o.spec.template.spec.initContainers ?? []), ...o.spec.template.spec.containers])
        .map((c) => c.image);
      // The join service (init container and container), the key service and the node operator.
      expect(images.length).toBe(4);
      expect(new Set(images)).toEqual(new Set([image]));
    }
    // The base is the same whatever the image: only the overlays' images: entries change.
    expect(readFileSync(join(out, 'base/join-service.yaml'))).toEqual(
      readFileSync(join(dir, 'base/join-service.yaml')),
    );
  });

  it('--plain-key-service --all --out: every overlay renders the objects without mutual TLS', async () => {
    const out = join(tmp, `plain-${kubectls.indexOf(kubectl)}`);
    await quietly(() => runManifests(['--all', '--out', out, '--plain-key-service']));
    for (const t of targets) {
      const objects = kustomize(kubectl, join(out, overlayDir(t)));
      expect(byId(objects), `${t.cloud}-${t.variant}`).toEqual(
        byId(renderObjects({ ...t, keyServiceTls: false }).map((r) => JSON.parse(JSON.stringify(r.object)))),
      );
      expect(JSON.stringify(objects)).not.toMatch(/key-service-tls|--tls-cert|--key-service-ca/);
    }
  });

  it("an operator's own overlay replaces join-config with its files (deploy/README.md)", () => {
    const own = join(tmp, `operator-${kubectls.indexOf(kubectl)}`);
    mkdirSync(own);
    const config = '{"measurements": {"4": {"expected": "ab", "warnOnly": false}}}\n';
    const salt = Buffer.from(Array.from({ length: 32 }, (_, i) => 0x80 + i));
    writeFileSync(join(own, 'attestation-config.json'), config);
    writeFileSync(join(own, 'measurement-salt.bin'), salt);
    writeFileSync(
      join(own, 'kustomization.yaml'),
      [
        'bases:',
        `  - ${relative(own, join(dir, 'overlays/gcp-gcp-sev-snp'))}`,
        'configMapGenerator:',
        '  - name: join-config',
        '    namespace: kube-system',
        '    behavior: replace',
        '    files:',
        '      - attestationConfig=attestation-config.json',
        '      - measurementSalt=measurement-salt.bin',
        '',
      ].join('\n'),
    );
    const objects = kustomize(kubectl, own);
    const cms = objects.filter((o) => o.kind === 'ConfigMap' && o.metadata.name.startsWith('join-config'));
    expect(cms.map((o) => o.metadata.name)).toEqual(['join-config']);
    expect(cms[0].data).toEqual({ attestationConfig: config });
    expect(Buffer.from(cms[0].binaryData.measurementSalt, 'base64')).toEqual(salt);
    expect(byId(objects.filter((o) => o.kind !== 'ConfigMap' || o.metadata.name !== 'join-config'))).toEqual(
      expected({ cloud: 'gcp', variant: 'gcp-sev-snp' }).filter(
        (o) => o.kind !== 'ConfigMap' || o.metadata.name !== 'join-config',
      ),
    );
  });

  it("--attestation-config and --measurement-salt-file: the overlay generates join-config from the cluster's files", async () => {
    const config = `${JSON.stringify({ measurements: { 4: { expected: '11'.repeat(32), warnOnly: false }, 8: { expected: '22'.repeat(32), warnOnly: false }, 9: { expected: '33'.repeat(32), warnOnly: false }, 11: { expected: '44'.repeat(32), warnOnly: false }, 12: { expected: '55'.repeat(32), warnOnly: false }, 13: { expected: '66'.repeat(32), warnOnly: false }, 15: { expected: '00'.repeat(32), warnOnly: false } } }, null, 2)}\n`;
    const salt = Buffer.from(Array.from({ length: 32 }, (_, i) => 0xc0 + i));
    writeFileSync(join(tmp, 'config.json'), config);
    writeFileSync(join(tmp, 'salt.bin'), salt);
    const out = join(tmp, `own-${kubectls.indexOf(kubectl)}`);
    const flags = [
      '--attestation-config',
      join(tmp, 'config.json'),
      '--measurement-salt-file',
      join(tmp, 'salt.bin'),
    ];
    await quietly(() => runManifests(['--cloud', 'qemu', '--variant', 'qemu-vtpm', '--out', out, ...flags]));
    expect(listAll(join(out, 'overlays'))).toContain('qemu-qemu-vtpm/kustomization.yaml');
    expect(readFileSync(join(out, 'overlays/qemu-qemu-vtpm/measurement-salt.bin'))).toEqual(salt);
    const cm = kustomize(kubectl, join(out, 'overlays/qemu-qemu-vtpm')).find(
      (o) => o.kind === 'ConfigMap' && o.metadata.name === 'join-config',
    );
    expect(cm.data.attestationConfig).toBe(config);
    expect(Buffer.from(cm.binaryData.measurementSalt, 'base64')).toEqual(salt);
    expect(await validateObject(cm)).toEqual([]);
  });
});

describe('confboot manifests, the cluster inputs and the image', () => {
  const write = (name: string, content: string | Buffer) => {
    writeFileSync(join(tmp, name), content);
    return join(tmp, name);
  };

  it('refuses an attestation config that is not JSON, one that enforces nothing, a salt of the wrong size, and a bad image', async () => {
    const base = ['--cloud', 'qemu', '--variant', 'qemu-vtpm'];
    await expect(runManifests([...base, '--attestation-config', write('bad.json', '{')])).rejects.toThrow(
      /attestation config: not JSON/,
    );
    await expect(
      runManifests([...base, '--attestation-config', write('weak.json', '{"measurements": {}}')]),
    ).rejects.toThrow(/measurement|proves nothing/);
    await expect(
      runManifests([...base, '--measurement-salt-file', write('short.bin', Buffer.alloc(16))]),
    ).rejects.toThrow(/exactly 32 bytes, not 16/);
    await expect(runManifests([...base, '--attestation-config', join(tmp, 'missing.json')])).rejects.toThrow(
      /--attestation-config: reading .*missing.json: ENOENT/,
    );
    await expect(runManifests(['--all', '--out', tmp, '--measurement-salt-file', 'x'])).rejects.toThrow(
      /leave out --all/,
    );
    await expect(runManifests([...base, '--image', 'confboot@sha256:abc'])).rejects.toThrow(
      /--image: not an image reference/,
    );
  });
});

/** Runs `body` with the CLI's "wrote …" lines on stderr discarded. */
async function quietly(body: () => Promise<number>): Promise<void> {
  const stderr = process.stderr.write;
  process.stderr.write = (() => true) as typeof process.stderr.write;
  try {
    expect(await body()).toBe(0);
  } finally {
    process.stderr.write = stderr;
  }
}
