/**
 * How the kustomize tree is derived from the manifests (src/app/manifests/kustomize.ts): what goes
 * into the base, what each overlay patches and generates, and how an image reference becomes an
 * `images:` entry. test/deploy/kustomize.test.ts renders the tree with the real kubectl.
 */
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import {
  BASE_DIR,
  overlayDir,
  parseImageReference,
  renderKustomizeTree,
} from '../../../src/app/manifests/kustomize.js';
import { deployTargets } from '../../../src/app/manifests/manifests.js';

// biome-ignore lint/suspicious/noExplicitAny: YAML documents
type Obj = any;
const text = (files: ReturnType<typeof renderKustomizeTree>, path: string): string => {
  const f = files.find((x) => x.path === path);
  if (f === undefined) throw new Error(`no ${path}`);
  return typeof f.content === 'string' ? f.content : Buffer.from(f.content).toString('latin1');
};

describe('parseImageReference', () => {
  it.each([
    ['ghcr.io/confboot/confboot:0.1.0', { name: 'ghcr.io/confboot/confboot', tag: '0.1.0' }],
    ['registry.example:5000/confboot', { name: 'registry.example:5000/confboot' }],
    ['registry.example:5000/confboot:dev', { name: 'registry.example:5000/confboot', tag: 'dev' }],
    [`confboot@sha256:${'0f'.repeat(32)}`, { name: 'confboot', digest: `sha256:${'0f'.repeat(32)}` }],
    [`a/b:1@sha256:${'0f'.repeat(32)}`, { name: 'a/b', tag: '1', digest: `sha256:${'0f'.repeat(32)}` }],
  ])('splits %s', (ref, parts) => {
    expect(parseImageReference(ref)).toEqual(parts);
  });

  it.each([['confboot@sha256:abc'], ['confboot:'], [''], ['conf boot'], [`x@sha512:${'0'.repeat(128)}`]])(
    'refuses "%s"',
    (ref) => {
      expect(() => parseImageReference(ref)).toThrow(/not an image reference/);
    },
  );
});

describe('renderKustomizeTree', () => {
  const all = renderKustomizeTree();
  const targets = deployTargets();

  it('writes one base and one overlay per target; the base is the same for any image and any selection', () => {
    const overlays = new Set(
      all.filter((f) => f.path.startsWith('overlays/')).map((f) => f.path.split('/')[1]),
    );
    expect([...overlays].sort()).toEqual(targets.map((t) => overlayDir(t).split('/')[1]).sort());
    const one = renderKustomizeTree({
      targets: [targets[0] as (typeof targets)[0]],
      image: `other.example/confboot@sha256:${'ab'.repeat(32)}`,
    });
    const base = (files: typeof all) => files.filter((f) => f.path.startsWith(`${BASE_DIR}/`));
    expect(base(one)).toEqual(base(all));
    expect(
      one
        .filter((f) => f.path.startsWith('overlays/'))
        .every((f) => f.path.startsWith(`${overlayDir(targets[0] as (typeof targets)[0])}/`)),
    ).toBe(true);
    const k = parse(text(one, `${overlayDir(targets[0] as (typeof targets)[0])}/kustomization.yaml`));
    expect(k.images).toEqual([
      {
        name: 'ghcr.io/confboot/confboot',
        newName: 'other.example/confboot',
        digest: `sha256:${'ab'.repeat(32)}`,
      },
    ]);
  });

  it('keeps what differs out of the base: the join service has no arguments there, each overlay patches in its own', () => {
    const ds = parse(
      text(all, `${BASE_DIR}/join-service.yaml`)
        .split('---\n')
        .find((d) => d.includes('kind: DaemonSet')) as string,
    );
    expect(ds.spec.template.spec.containers[0].args).toBeUndefined();
    expect(ds.spec.template.spec.volumes.map((v: Obj) => v.name)).not.toContain('ak-registry');
    for (const t of targets) {
      const patch = parse(text(all, `${overlayDir(t)}/join-service-daemonset.yaml`));
      expect(patch.metadata).toEqual({ name: 'join-service', namespace: 'kube-system' });
      const [container, ...more] = patch.spec.template.spec.containers;
      expect(more).toEqual([]);
      expect(container.args).toContain(`--attestation-variant=${t.variant}`);
      expect(container.args).toContain(`--csp=${t.cloud}`);
      expect(text(all, `${BASE_DIR}/join-service.yaml`)).not.toContain(`--attestation-variant=`);
    }
  });

  it('generates join-config (and the AK registry where the variant reads one) from files the operator can replace', () => {
    for (const t of targets) {
      const k = parse(text(all, `${overlayDir(t)}/kustomization.yaml`));
      expect(k.bases).toEqual(['../../base']);
      expect(k.generatorOptions.disableNameSuffixHash).toBe(true);
      const names = k.configMapGenerator.map((g: Obj) => g.name);
      expect(names).toEqual(
        t.variant === 'qemu-vtpm' ? ['join-config', 'join-ak-registry'] : ['join-config'],
      );
      const files = k.configMapGenerator[0].files;
      expect(files).toContain('attestationConfig=attestation-config.json');
      expect(files).toContain('measurementSalt=measurement-salt.bin');
      for (const f of k.configMapGenerator.flatMap((g: Obj) => g.files))
        expect(
          all.some((x) => x.path === `${overlayDir(t)}/${f.split('=').at(-1)}`),
          f,
        ).toBe(true);
      expect(JSON.parse(text(all, `${overlayDir(t)}/attestation-config.json`)).measurements).toBeDefined();
    }
    expect(text(all, 'overlays/qemu-qemu-vtpm/measurement-salt.bin')).toBe('\xff'.repeat(32));
  });

  it('puts the operator’s attestation config, salt and cluster ID into the overlay', () => {
    const config = '{"measurements": {"4": {"expected": "aa", "warnOnly": false}}}\n';
    const salt = new Uint8Array(32).fill(7);
    const target = { cloud: 'gcp', variant: 'gcp-sev-es' } as const;
    const files = renderKustomizeTree({
      targets: [target],
      attestationConfig: config,
      measurementSalt: salt,
      clusterId: new Uint8Array(32).fill(0xab),
    });
    expect(text(files, `${overlayDir(target)}/attestation-config.json`)).toBe(config);
    expect(text(files, `${overlayDir(target)}/cluster-id.txt`)).toBe(`${'ab'.repeat(32)}\n`);
    expect(
      Buffer.from(files.find((f) => f.path === `${overlayDir(target)}/measurement-salt.bin`)?.content ?? ''),
    ).toEqual(Buffer.from(salt));
    expect(text(files, `${overlayDir(target)}/kustomization.yaml`)).not.toContain('placeholder');
    const baseOf = (f: typeof files) => f.filter((x) => x.path.startsWith(`${BASE_DIR}/`));
    expect(baseOf(files)).toEqual(baseOf(all));
  });
});
