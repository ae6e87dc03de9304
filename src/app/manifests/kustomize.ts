/**
 * The manifests as a kustomize tree (app layer): `base/` holds what every cloud and attestation
 * variant shares, `overlays/<cloud>-<variant>/` what one target changes. It is derived from the
 * same builders as the single-file manifests (manifests.ts), so `kubectl kustomize` of an overlay
 * yields the objects `confboot manifests --cloud C --variant V` prints (test/deploy checks this):
 *
 * - an object equal for every target is a base resource;
 * - a ConfigMap that differs (the attestation config, the AK registry) comes from a
 *   configMapGenerator over files in the overlay, which the operator replaces with their own;
 * - another object that differs is in the base with what all targets share, and each overlay
 *   patches in the rest (a strategic merge patch: lists of containers, volumes, mounts and
 *   environment variables merge by their key, every other list is replaced whole);
 * - the container image is an `images:` entry of each overlay.
 *
 * Only fields kustomize v2.0.3 (kubectl 1.20, Debian's kubernetes-client) already knew are used
 * (`bases`, `patchesStrategicMerge`, `configMapGenerator`, `generatorOptions`, `images`), so the
 * tree renders there and with kustomize v5, which still reads them (and warns that they are old).
 */
import { isDeepStrictEqual } from 'node:util';
import type { V1ConfigMap } from '@kubernetes/client-node';
import { Document } from 'yaml';
import { DEFAULT_IMAGE, type DeployTarget, type RenderedObject } from './common.js';
import { deployTargets, type RenderOptions, renderObjects, yamlFile } from './manifests.js';

// biome-ignore lint/suspicious/noExplicitAny: Kubernetes objects as plain JSON
type Json = any;

/** One file of the tree: its path below the output directory and its content. */
export interface TreeFile {
  path: string;
  content: string | Uint8Array;
}

/** Options of {@link renderKustomizeTree}. */
export interface KustomizeOptions extends Omit<RenderOptions, 'cloud' | 'variant'> {
  /** The overlays to write; default every deploy target. The base is the same either way. */
  targets?: readonly DeployTarget[];
}

/** Directory of the shared objects. */
export const BASE_DIR = 'base';
/** Directory of the overlay of `target`. */
export const overlayDir = (target: DeployTarget): string => `overlays/${target.cloud}-${target.variant}`;

/** The file a ConfigMap key is generated from (the salt file is what `confboot init` writes). */
const GENERATED_FILE_NAMES: Readonly<Record<string, string>> = {
  attestationConfig: 'attestation-config.json',
  measurementSalt: 'measurement-salt.bin',
  clusterId: 'cluster-id.txt',
  cloudApiEndpoint: 'cloud-api-endpoint.txt',
  azureAkRoots: 'azure-ak-roots.pem',
};

/** Strategic-merge keys of the lists the patches touch; any other list is replaced whole. */
const MERGE_KEYS: Readonly<Record<string, string>> = {
  containers: 'name',
  initContainers: 'name',
  volumes: 'name',
  env: 'name',
  volumeMounts: 'mountPath',
  ports: 'containerPort',
};

const idOf = (o: Json): string => `${o.kind}/${o.metadata?.namespace ?? ''}/${o.metadata?.name}`;
const isMap = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);
const keyedBy = (field: string | undefined, list: unknown[]): string | undefined => {
  const key = field === undefined ? undefined : MERGE_KEYS[field];
  return key !== undefined && list.every((item) => isMap(item) && item[key] !== undefined) ? key : undefined;
};

/** What `a` and `b` share (undefined when nothing): maps field by field, keyed lists item by item. */
function common(a: unknown, b: unknown, field?: string): unknown {
  if (isDeepStrictEqual(a, b)) return a;
  if (isMap(a) && isMap(b)) {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(a)) {
      const c = k in b ? common(v, b[k], k) : undefined;
      if (c !== undefined) out[k] = c;
    }
    return out;
  }
  if (Array.isArray(a) && Array.isArray(b)) {
    const key = keyedBy(field, [...a, ...b]);
    if (key === undefined) return undefined;
    return a.flatMap((item: Json) => {
      const other = b.find((x: Json) => x[key] === item[key]);
      return other === undefined ? [] : [common(item, other)];
    });
  }
  return undefined;
}

/** The strategic merge patch that turns `base` into `target` (undefined when equal). */
function patchOf(target: unknown, base: unknown, path: string, field?: string): unknown {
  if (isDeepStrictEqual(target, base)) return undefined;
  if (isMap(target) && isMap(base)) {
    const out: Record<string, unknown> = {};
    for (const k of Object.keys(base))
      if (!(k in target)) throw new Error(`${path}/${k} is in the base but not in the target`);
    for (const [k, v] of Object.entries(target)) {
      const p = k in base ? patchOf(v, base[k], `${path}/${k}`, k) : v;
      if (p !== undefined) out[k] = p;
    }
    return out;
  }
  if (Array.isArray(target) && Array.isArray(base)) {
    const key = keyedBy(field, [...target, ...base]);
    if (key === undefined) return target;
    for (const b of base as Json[])
      if (!target.some((t: Json) => t[key] === b[key]))
        throw new Error(`${path}: ${key} ${b[key]} is in the base but not in the target`);
    return target.flatMap((item: Json) => {
      const b = (base as Json[]).find((x) => x[key] === item[key]);
      if (b === undefined) return [item];
      const p = patchOf(item, b, `${path}/${item[key]}`);
      return p === undefined ? [] : [{ [key]: item[key], ...(p as object) }];
    });
  }
  return target;
}

/** `[registry/]repository[:tag][@digest]` split the way kustomize's `images:` entries name them. */
export function parseImageReference(ref: string): { name: string; tag?: string; digest?: string } {
  const at = ref.indexOf('@');
  const digest = at < 0 ? undefined : ref.slice(at + 1);
  const rest = at < 0 ? ref : ref.slice(0, at);
  const colon = rest.lastIndexOf(':');
  const tag = colon > rest.lastIndexOf('/') ? rest.slice(colon + 1) : undefined;
  const name = tag === undefined ? rest : rest.slice(0, colon);
  if (
    name === '' ||
    /\s/.test(ref) ||
    tag === '' ||
    (digest !== undefined && !/^sha256:[0-9a-f]{64}$/.test(digest))
  )
    throw new Error(`not an image reference: "${ref}" (want NAME[:TAG][@sha256:<64 hex digits>])`);
  return { name, ...(tag === undefined ? {} : { tag }), ...(digest === undefined ? {} : { digest }) };
}

/** A kustomization.yaml with a comment header. */
function kustomization(header: string, body: Record<string, unknown>): string {
  const doc = new Document(body);
  doc.commentBefore = header;
  return doc.toString({ lineWidth: 0 });
}

/** Which base file an object belongs in. */
function baseFileOf(object: Json): string {
  if (object.kind === 'CustomResourceDefinition') return 'crds.yaml';
  if (/^(ServiceAccount|Role|RoleBinding|ClusterRole|ClusterRoleBinding)$/.test(object.kind))
    return 'access.yaml';
  if (object.kind === 'ConfigMap') return 'config.yaml';
  return `${object.metadata.labels['app.kubernetes.io/name']}.yaml`;
}

const GENERATED =
  ' Generated by `confboot manifests --all --out deploy/kubernetes` (src/app/manifests/kustomize.ts);\n do not edit: change the generator and run it again.';

/** The base and overlays of every target; overlays only for `options.targets` when given. */
export function renderKustomizeTree(options: KustomizeOptions = {}): TreeFile[] {
  const { targets: selected, image, ...renderOptions } = options;
  const all = deployTargets();
  // The base comes from every target with the default image and no cluster's own config or salt,
  // so it is the same whatever the options; each overlay's `images:` entry names the real image.
  const structure = { image: DEFAULT_IMAGE, keyServiceTls: renderOptions.keyServiceTls !== false };
  const perTarget = all.map((t) => renderObjects({ ...t, ...structure }));
  const ids = [...new Set(perTarget.flatMap((objects) => objects.map((r) => idOf(r.object))))];
  const everywhere = (id: string) => perTarget.map((objects) => objects.find((r) => idOf(r.object) === id));

  const base: RenderedObject[] = [];
  const patched = new Map<string, Json>();
  for (const id of ids) {
    const found = everywhere(id);
    const first = found[0] as RenderedObject;
    if (found.every((r) => r !== undefined && isDeepStrictEqual(r.object, first.object))) base.push(first);
    else if (first?.object.kind !== 'ConfigMap' && found.every((r) => r !== undefined)) {
      const skeleton = found.reduce<unknown>(
        (acc, r) => common(acc, (r as RenderedObject).object),
        first.object,
      );
      patched.set(id, skeleton);
      base.push({ comment: first.comment, object: skeleton as Json });
    }
  }
  const files: TreeFile[] = [];
  const baseFiles = [...new Set(base.map((r) => baseFileOf(r.object)))];
  for (const file of baseFiles)
    files.push({
      path: `${BASE_DIR}/${file}`,
      content: yamlFile(base.filter((r) => baseFileOf(r.object) === file)),
    });
  files.push({
    path: `${BASE_DIR}/kustomization.yaml`,
    content: kustomization(
      ` confboot's Kubernetes objects that every cloud and attestation variant shares; deploy an overlay\n (overlays/<cloud>-<variant>), not this directory.\n${GENERATED}`,
      { resources: baseFiles },
    ),
  });
  for (const target of selected ?? all)
    files.push(
      ...overlayFiles(target, renderObjects({ ...renderOptions, ...target, ...structure }), base, patched, {
        image: image ?? DEFAULT_IMAGE,
        mtls: renderOptions.keyServiceTls !== false,
        ownConfig:
          renderOptions.attestationConfig !== undefined &&
          renderOptions.measurementSalt !== undefined &&
          renderOptions.clusterId !== undefined,
      }),
    );
  return files;
}

/** The files of one overlay. */
function overlayFiles(
  target: DeployTarget,
  objects: readonly RenderedObject[],
  base: readonly RenderedObject[],
  patched: ReadonlyMap<string, Json>,
  choices: { image: string; mtls: boolean; ownConfig: boolean },
): TreeFile[] {
  const dir = overlayDir(target);
  const inBase = new Set(base.map((r) => idOf(r.object)));
  const files: TreeFile[] = [];
  const patches: string[] = [];
  const resources: RenderedObject[] = [];
  const generated: V1ConfigMap[] = [];
  for (const { comment, object } of objects) {
    const id = idOf(object);
    const skeleton = patched.get(id);
    if (skeleton !== undefined) {
      const { metadata, ...rest } = patchOf(object, skeleton, id) as Json;
      const name = `${object.metadata?.name}-${String(object.kind).toLowerCase()}.yaml`;
      const patch = {
        apiVersion: object.apiVersion,
        kind: object.kind,
        metadata: { name: object.metadata?.name, namespace: object.metadata?.namespace, ...metadata },
        ...rest,
      };
      files.push({
        path: `${dir}/${name}`,
        content: yamlFile([
          {
            comment: ` What ${target.variant} on ${target.cloud} changes in ${object.kind} ${object.metadata?.name}.`,
            object: patch,
          },
        ]),
      });
      patches.push(name);
    } else if (inBase.has(id)) continue;
    else if (object.kind === 'ConfigMap') generated.push(object as V1ConfigMap);
    else resources.push({ comment, object });
  }
  if (resources.length > 0) files.push({ path: `${dir}/resources.yaml`, content: yamlFile(resources) });
  const labels = generated[0]?.metadata?.labels;
  for (const cm of generated) {
    if (!isDeepStrictEqual(cm.metadata?.labels, labels) || cm.metadata?.annotations !== undefined)
      throw new Error(
        `ConfigMap ${cm.metadata?.name}: generated ConfigMaps must share their labels and have no annotations`,
      );
  }
  const generators = generated.map((cm) => {
    const entries: Array<[string, string | Uint8Array]> = [
      ...Object.entries(cm.data ?? {}),
      ...Object.entries(cm.binaryData ?? {}).map(([k, v]): [string, Uint8Array] => [
        k,
        Buffer.from(v, 'base64'),
      ]),
    ];
    const sources = entries.map(([key, content]) => {
      const file = GENERATED_FILE_NAMES[key] ?? key;
      files.push({ path: `${dir}/${file}`, content });
      return file === key ? file : `${key}=${file}`;
    });
    return { name: cm.metadata?.name, namespace: cm.metadata?.namespace, files: sources };
  });
  const ref = parseImageReference(choices.image);
  const defaultRef = parseImageReference(DEFAULT_IMAGE);
  const body: Record<string, unknown> = {
    bases: [`../../${BASE_DIR}`],
    ...(resources.length > 0 ? { resources: ['resources.yaml'] } : {}),
    ...(patches.length > 0 ? { patchesStrategicMerge: patches } : {}),
    ...(generators.length > 0
      ? {
          // Fixed names: the join service watches join-config and confboot's commands update it by name.
          generatorOptions: { disableNameSuffixHash: true, labels },
          configMapGenerator: generators,
        }
      : {}),
    images: [
      {
        name: defaultRef.name,
        newName: ref.name,
        ...(ref.digest !== undefined
          ? { digest: ref.digest }
          : ref.tag !== undefined
            ? { newTag: ref.tag }
            : {}),
      },
    ],
  };
  const header = [
    ` confboot for cloud ${target.cloud}, attestation variant ${target.variant}: the base and what this target changes.`,
    GENERATED,
    ...(choices.ownConfig
      ? []
      : [
          ' Before the first apply: attestation-config.json holds zero reference measurements (every node is',
          " refused), measurement-salt.bin a placeholder and cluster-id.txt is empty: put the cluster's own there",
          ' (confboot init writes measurement-salt.bin and prints the cluster ID), or generate join-config from',
          ' your files in an overlay of your own (deploy/README.md).',
        ]),
    ...(generated.some((cm) => cm.data?.cloudApiEndpoint === '')
      ? [
          ' cloud-api-endpoint.txt is empty: put the Nova compute endpoint there (e.g.',
          ' https://nova.example:8774/v2.1); the join service does not start without it.',
        ]
      : []),
    ' Apply with: confboot manifests --receipt-key-secret | kubectl apply -f -   (once: the join receipt key)',
    ...(!choices.mtls
      ? []
      : [
          '             confboot manifests --tls-secrets | kubectl apply -f -   (once: the mutual-TLS Secrets)',
        ]),
    `             kubectl apply -k deploy/kubernetes/${dir}`,
  ].join('\n');
  files.push({ path: `${dir}/kustomization.yaml`, content: kustomization(header, body) });
  return files;
}
