/**
 * The join service's CustomResourceDefinition and RBAC in the rendered manifests agree with what the
 * Kubernetes adapters (src/adapters/kubernetes: api.ts, evidence-store.ts, event-recorder.ts) really do. Every adapter call is made through
 * the real @kubernetes/client-node against a SIMULATED Kubernetes API (fake-kube-api.ts); each
 * request it sees is turned into the attributes the API server's RBAC authorizer checks (verb,
 * group, resource, namespace, name), and the rendered Role and ClusterRole must allow every one of
 * them, with no rule left over and no wildcard.
 */
import 'reflect-metadata';
import { readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { parseAllDocuments, parse as parseYaml } from 'yaml';
import { loadKubeConfig } from '../../src/adapters/kubernetes/api.js';
import { KubeBootstrapTokens } from '../../src/adapters/kubernetes/bootstrap-tokens.js';
import { KubeClusterFacts } from '../../src/adapters/kubernetes/cluster-facts.js';
import { diskBindingName, KubeDiskBindings } from '../../src/adapters/kubernetes/disk-bindings.js';
import { KubeEventRecorder } from '../../src/adapters/kubernetes/event-recorder.js';
import { EVIDENCE_GROUP, KubeEvidenceStore } from '../../src/adapters/kubernetes/evidence-store.js';
import {
  DISK_BINDING_GROUP,
  DISK_BINDING_PLURAL,
  DISK_BINDING_VERSION,
  MASTER_SECRET_NAME,
} from '../../src/adapters/kubernetes/names.js';
import { silentLogger } from '../../src/adapters/log/pino-logger.js';
import { createKeyServiceTls, keyServiceDnsNames } from '../../src/adapters/pki/key-service-tls.js';
import { generateReceiptKeyPem } from '../../src/adapters/receipts/receipt-key.js';
import { bringupObjects, COMPONENTS_CONFIGMAP_NAME } from '../../src/app/bringup/objects.js';
import { diskBindingCrd } from '../../src/app/manifests/access.js';
import { type DeployTarget, NAMESPACE } from '../../src/app/manifests/common.js';
import { deployTargets, renderManifests } from '../../src/app/manifests/manifests.js';
import { FakeKubeApi } from '../adapters/kubernetes/fake-kube-api.js';
import { FakeClock } from '../fakes/fake-clock.js';
import { useTmpDirs } from '../support/tmp.js';
import { validateObject } from './k8s-schema.js';

// biome-ignore lint/suspicious/noExplicitAny: manifests are untyped YAML
type Obj = any;

const tmp = useTmpDirs('confboot-rbac-');
const apis: FakeKubeApi[] = [];
afterEach(async () => {
  for (const api of apis.splice(0)) await api.close();
});

/** What the RBAC authorizer checks for one request. */
interface Access {
  verb: string;
  group: string;
  resource: string;
  namespace: string | undefined;
  name: string | undefined;
}

/** The RBAC attributes of a request the simulated API saw (core `/api/v1` or `/apis/<group>/<version>`). */
function accessOf(method: string, path: string, contentType: string | undefined): Access[] {
  const m = /^\/(?:api\/v1|apis\/([^/]+)\/[^/]+)(?:\/namespaces\/([^/]+))?\/([^/]+)(?:\/([^/]+))?$/.exec(
    path,
  );
  if (!m) throw new Error(`not a resource path: ${path}`);
  const [, group = '', namespace, resource = '', name] = m;
  const verbs: Record<string, string> = {
    POST: 'create',
    GET: name ? 'get' : 'list',
    PATCH: 'patch',
    DELETE: 'delete',
  };
  const verb = verbs[method];
  if (!verb) throw new Error(`unexpected method ${method} ${path}`);
  const access = { verb, group, resource, namespace, name };
  // A server-side apply of an object that does not exist yet creates it, and the API server then
  // authorizes `create` as well.
  if (contentType === 'application/apply-patch+yaml') return [access, { ...access, verb: 'create' }];
  return [access];
}

/**
 * Every request the adapters make, from every adapter method the join service calls; the
 * NodeVersion names `componentsReference` (default: the bring-up's components ConfigMap).
 */
async function adapterAccesses(componentsReference = COMPONENTS_CONFIGMAP_NAME): Promise<Access[]> {
  const api = await new FakeKubeApi().start();
  apis.push(api);
  const kubeconfigPath = join(tmp(), 'kubeconfig');
  writeFileSync(kubeconfigPath, api.kubeconfig());
  const kubeConfig = loadKubeConfig(kubeconfigPath);
  const clock = new FakeClock(Date.UTC(2026, 10, 21));
  api.seedComponents(componentsReference, []);
  await new KubeBootstrapTokens({ kubeConfig, clock }).createToken(60_000);
  const facts = new KubeClusterFacts({ kubeConfig, clock });
  await facts.components();
  await facts.addJoiningNode('worker-1', false);
  await facts.addJoiningNode('control-1', true);
  const disks = new KubeDiskBindings({ kubeConfig });
  const uuid = '0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0';
  await disks.bind({ diskUuid: uuid, nodeName: 'worker-1', owner: 'instance/worker-1' });
  await disks.bind({ diskUuid: uuid, nodeName: 'worker-2', owner: 'instance/worker-2' }); // 409, then get
  // A fresh join releases its instance's stale bindings: list by owner label, delete.
  await disks.releaseOthers(['instance/worker-1'], '00000000-0000-0000-0000-000000000002');
  // Evidence: apply (with a read for a record without a node name), the prune's list and delete.
  const evidence = new KubeEvidenceStore({ kubeConfig, clock, logger: silentLogger, maxRecords: 1 });
  const record = (key: string, nodeName?: string) => ({
    key,
    ...(nodeName !== undefined ? { nodeName } : {}),
    peer: '10.0.0.5:4000',
    variant: 'qemu-vtpm',
    oid: '1.3.9900.1.2',
    document: new Uint8Array([1]),
    nonce: new Uint8Array(32),
    rpc: 'IssueJoinTicket',
    outcome: 'issued' as const,
    reason: 'ok',
    at: clock.now().toISOString(),
  });
  await evidence.record(record(`disk/${uuid}`, 'worker-1'));
  await evidence.idle();
  await evidence.record(record('disk/00000000-0000-0000-0000-000000000001'));
  await evidence.idle();
  expect(await evidence.prune()).toBe(1);
  // Events: a refusal creates one, a repeat after the patch interval patches its count.
  const events = new KubeEventRecorder({ kubeConfig, clock, logger: silentLogger, patchIntervalMs: 1000 });
  const refusal = {
    rpc: 'IssueJoinTicket',
    peer: '10.0.0.5:4000',
    variant: 'qemu-vtpm',
    reason: 'deny-list',
    attested: true,
  };
  events.refused(refusal);
  await events.idle();
  await clock.advance(1000);
  events.refused(refusal);
  await events.idle();
  expect(api.violations).toEqual([]);
  return api.requests.flatMap((r) => accessOf(r.method, r.path, r.contentType));
}

const allows = (rule: Obj, a: Access) =>
  rule.apiGroups.includes(a.group) &&
  rule.resources.includes(a.resource) &&
  rule.verbs.includes(a.verb) &&
  (rule.resourceNames === undefined || (a.name !== undefined && rule.resourceNames.includes(a.name)));

describe.each(deployTargets())('join service CRD and RBAC for $cloud / $variant', (target) => {
  // The objects every overlay of deploy/kubernetes renders to (test/deploy/kustomize.test.ts).
  const docs: Obj[] = parseAllDocuments(renderManifests(target)).map((d) => d.toJS());
  const find = (kind: string, name: string): Obj => {
    const o = docs.find((x) => x?.kind === kind && x?.metadata?.name === name);
    if (!o) throw new Error(`no ${kind}/${name} for ${target.cloud}/${target.variant}`);
    return o;
  };
  const account = docs.find((o) => o.kind === 'DaemonSet').spec.template.spec.serviceAccountName;
  const boundTo = (bindingKind: string, roleKind: string): Obj[] =>
    docs
      .filter(
        (b) =>
          b.kind === bindingKind &&
          b.roleRef.kind === roleKind &&
          b.roleRef.apiGroup === 'rbac.authorization.k8s.io' &&
          b.subjects.some(
            (s: Obj) => s.kind === 'ServiceAccount' && s.name === account && s.namespace === 'kube-system',
          ),
      )
      .map((b) => ({ ...find(roleKind, b.roleRef.name), bindingNamespace: b.metadata.namespace }));

  it('defines the DiskBinding CRD with the group, version and plural KubeDiskBindings uses', async () => {
    const crd = find('CustomResourceDefinition', `${DISK_BINDING_PLURAL}.${DISK_BINDING_GROUP}`);
    expect(await validateObject(crd)).toEqual([]);
    expect(crd.spec.group).toBe(DISK_BINDING_GROUP);
    expect(crd.spec.scope).toBe('Cluster');
    expect(crd.spec.names).toMatchObject({ kind: 'DiskBinding', plural: DISK_BINDING_PLURAL });
    expect(diskBindingName('0F1E2D3C-0000-4000-8000-000000000000')).toMatch(/^[a-z0-9-]+$/);
    const [version, ...others] = crd.spec.versions;
    expect(others).toEqual([]);
    expect(version).toMatchObject({ name: DISK_BINDING_VERSION, served: true, storage: true });
    const spec = version.schema.openAPIV3Schema.properties.spec;
    expect(spec.required.sort()).toEqual(['diskUUID', 'nodeName', 'owner']);
    for (const f of spec.required) expect(spec.properties[f].type).toBe('string');
  });

  it('binds a Role in kube-system and a ClusterRole to the join service account; all RBAC objects validate', async () => {
    expect(account).toBe('join-service');
    expect(boundTo('RoleBinding', 'Role').map((r) => [r.metadata.namespace, r.bindingNamespace])).toEqual([
      ['kube-system', 'kube-system'],
    ]);
    expect(boundTo('ClusterRoleBinding', 'ClusterRole')).toHaveLength(1);
    for (const o of docs.filter((x) => x.apiVersion === 'rbac.authorization.k8s.io/v1'))
      expect(await validateObject(o), `${o.kind}/${o.metadata.name}`).toEqual([]);
  });

  it('allows every Kubernetes API call the adapters make, and nothing more (no wildcard, no unused rule)', async () => {
    const [role] = boundTo('RoleBinding', 'Role');
    const [clusterRole] = boundTo('ClusterRoleBinding', 'ClusterRole');
    const rules: Array<{ rule: Obj; namespace?: string }> = [
      ...role.rules.map((rule: Obj) => ({ rule, namespace: role.metadata.namespace })),
      ...clusterRole.rules.map((rule: Obj) => ({ rule })),
    ];
    for (const { rule } of rules) {
      for (const field of ['apiGroups', 'resources', 'verbs', 'resourceNames'])
        expect(rule[field] ?? [], field).not.toContain('*');
      expect(rule.nonResourceURLs).toBeUndefined();
    }
    const accesses = await adapterAccesses();
    expect(accesses.map((a) => a.resource)).toEqual(
      expect.arrayContaining([
        'secrets',
        'configmaps',
        'nodeversions',
        'joiningnodes',
        DISK_BINDING_PLURAL,
        'evidencerecords',
        'events',
      ]),
    );
    expect(
      accesses
        .filter((a) => a.group === DISK_BINDING_GROUP && a.resource === DISK_BINDING_PLURAL)
        .map((a) => a.verb),
    ).toEqual(['create', 'create', 'get', 'list', 'delete']);
    expect(
      new Set(
        accesses
          .filter((a) => a.group === EVIDENCE_GROUP && a.resource === 'evidencerecords')
          .map((a) => a.verb),
      ),
    ).toEqual(new Set(['create', 'delete', 'get', 'list', 'patch']));
    expect(accesses.filter((a) => a.resource === 'events').map((a) => [a.verb, a.namespace])).toEqual([
      ['create', 'kube-system'],
      ['patch', 'kube-system'],
    ]);
    const used = new Set<Obj>();
    for (const a of accesses) {
      // A Role applies to its own namespace only; a ClusterRole (via ClusterRoleBinding) everywhere.
      const granting = rules.filter(
        (r) => (r.namespace === undefined || r.namespace === a.namespace) && allows(r.rule, a),
      );
      expect(
        granting.length,
        `${a.verb} ${a.group}/${a.resource} ${a.namespace ?? ''}/${a.name ?? ''}`,
      ).toBeGreaterThan(0);
      for (const r of granting) used.add(r.rule);
    }
    expect(rules.filter((r) => !used.has(r.rule))).toEqual([]);
    // Every verb granted is used: no delete, update, list or watch.
    for (const { rule, namespace } of rules)
      for (const verb of rule.verbs)
        expect(
          accesses.some(
            (a) =>
              a.verb === verb &&
              rule.resources.includes(a.resource) &&
              (namespace === undefined || a.namespace === namespace),
          ),
          `${verb} on ${rule.resources}`,
        ).toBe(true);
  });

  it('the authorization check refuses what the join service must not do', () => {
    const [role] = boundTo('RoleBinding', 'Role');
    const [clusterRole] = boundTo('ClusterRoleBinding', 'ClusterRole');
    const all = [...role.rules, ...clusterRole.rules];
    const denied: Access[] = [
      {
        verb: 'get',
        group: '',
        resource: 'secrets',
        namespace: 'kube-system',
        name: 'constellation-mastersecret',
      },
      { verb: 'list', group: '', resource: 'secrets', namespace: 'kube-system', name: undefined },
      // The key-service TLS Secrets the bring-up creates reach the pods as volumes only.
      ...['key-service-tls', 'join-service-key-service-tls'].map((name) => ({
        verb: 'get',
        group: '',
        resource: 'secrets',
        namespace: 'kube-system',
        name,
      })),
      ...['secrets', 'configmaps'].map((resource) => ({
        verb: 'patch',
        group: '',
        resource,
        namespace: 'kube-system',
        name: COMPONENTS_CONFIGMAP_NAME,
      })),
      {
        verb: 'patch',
        group: 'update.edgeless.systems',
        resource: 'nodeversions',
        namespace: undefined,
        name: 'constellation-version',
      },
      {
        verb: 'create',
        group: 'apiextensions.k8s.io',
        resource: 'customresourcedefinitions',
        namespace: undefined,
        name: undefined,
      },
      // Deleting a binding is allowed (a fresh join releases its instance's stale ones); watching is not.
      {
        verb: 'watch',
        group: DISK_BINDING_GROUP,
        resource: DISK_BINDING_PLURAL,
        namespace: undefined,
        name: undefined,
      },
      {
        verb: 'update',
        group: DISK_BINDING_GROUP,
        resource: DISK_BINDING_PLURAL,
        namespace: undefined,
        name: 'disk-x',
      },
      { verb: 'delete', group: '', resource: 'events', namespace: 'kube-system', name: 'x' },
      { verb: 'list', group: '', resource: 'events', namespace: 'kube-system', name: undefined },
      {
        verb: 'get',
        group: 'update.edgeless.systems',
        resource: 'nodeversions',
        namespace: undefined,
        name: 'other',
      },
    ];
    for (const a of denied)
      expect(
        all.some((r: Obj) => allows(r, a)),
        `${a.verb} ${a.resource}`,
      ).toBe(false);
    // The role's rules apply in kube-system only: a Secret elsewhere is not created.
    expect(role.metadata.namespace).toBe('kube-system');
  });
});

/** The REST resource (plural) of an object the bring-up creates; custom kinds from the bring-up's CRDs. */
function resourceOf(o: Obj, crds: Obj[]): { group: string; resource: string } {
  const group = o.apiVersion.includes('/') ? o.apiVersion.split('/')[0] : '';
  const crd = crds.find((c) => c.spec.group === group && c.spec.names.kind === o.kind);
  if (crd) return { group, resource: crd.spec.names.plural };
  const core: Record<string, string> = { Secret: 'secrets', ConfigMap: 'configmaps' };
  return { group, resource: core[o.kind] ?? `${o.kind.toLowerCase()}s` };
}

describe.each(deployTargets())(
  'what the bring-up creates for $cloud / $variant and what the join and key service may read',
  (target: DeployTarget) => {
    let objects: Obj[] = [];
    beforeAll(async () => {
      objects = bringupObjects({
        ...target,
        masterSecret: new Uint8Array(32).fill(1),
        masterSalt: new Uint8Array(32).fill(2),
        measurementSalt: new Uint8Array(32).fill(3),
        attestationConfig: '{}',
        components: [],
        kubernetesVersion: 'v1.31.1',
        tlsMaterial: await createKeyServiceTls({ serverNames: keyServiceDnsNames(NAMESPACE) }),
        receiptKeyPem: generateReceiptKeyPem(),
      }).map((b) => b.object);
    });
    const crds = () => objects.filter((o) => o.kind === 'CustomResourceDefinition');
    const workload = (kind: string, name: string): Obj => {
      const o = objects.find((x) => x.kind === kind && x.metadata.name === name);
      if (!o) throw new Error(`the bring-up has no ${kind}/${name}`);
      return o.spec.template.spec;
    };
    const created = (group: string, resource: string, namespace: string | undefined, name: string) =>
      objects.some((o) => {
        const r = resourceOf(o, crds());
        return (
          r.group === group &&
          r.resource === resource &&
          o.metadata.namespace === namespace &&
          o.metadata.name === name
        );
      });

    it('every Secret and ConfigMap the join-service and key-service pods mount is created by the bring-up', () => {
      const mounted: Array<[string, string]> = [];
      for (const pod of [workload('DaemonSet', 'join-service'), workload('Deployment', 'key-service')])
        for (const v of pod.volumes ?? []) {
          if (v.secret) mounted.push(['secrets', v.secret.secretName]);
          if (v.configMap) mounted.push(['configmaps', v.configMap.name]);
          for (const s of v.projected?.sources ?? []) {
            if (s.secret) mounted.push(['secrets', s.secret.name]);
            if (s.configMap) mounted.push(['configmaps', s.configMap.name]);
          }
        }
      expect(mounted).toEqual(
        expect.arrayContaining([
          ['configmaps', 'join-config'],
          ['secrets', MASTER_SECRET_NAME],
          ['secrets', 'key-service-tls'],
          ['secrets', 'join-service-key-service-tls'],
        ]),
      );
      for (const [resource, name] of mounted)
        expect(created('', resource, NAMESPACE, name), `${resource}/${name}`).toBe(true);
      // The join config carries the attestation config and the measurement salt the operator gave init.
      const joinConfig = objects.find((o) => o.kind === 'ConfigMap' && o.metadata.name === 'join-config');
      expect(joinConfig.data.attestationConfig).toBe('{}');
      expect(joinConfig.binaryData.measurementSalt).toBe(Buffer.alloc(32, 3).toString('base64'));
    });

    it("every object the join service reads through the API by name is created by the bring-up, and every custom resource it uses has the bring-up's CRD", async () => {
      const accesses = await adapterAccesses();
      for (const a of accesses.filter((x) => x.group !== '' && x.group !== 'rbac.authorization.k8s.io')) {
        const crd = crds().find((c) => c.spec.group === a.group && c.spec.names.plural === a.resource);
        expect(crd, `CRD for ${a.group}/${a.resource}`).toBeDefined();
        expect(crd.spec.scope).toBe(a.namespace === undefined ? 'Cluster' : 'Namespaced');
      }
      // DiskBindings and EvidenceRecords are the join service's own: it reads back what it created.
      const reads = accesses.filter(
        (a) => a.verb === 'get' && a.resource !== DISK_BINDING_PLURAL && a.group !== EVIDENCE_GROUP,
      );
      expect([...new Set(reads.map((a) => `${a.resource}/${a.name}`))].sort()).toEqual([
        `configmaps/${COMPONENTS_CONFIGMAP_NAME}`,
        'nodeversions/constellation-version',
      ]);
      for (const a of reads)
        expect(created(a.group, a.resource, a.namespace, a.name as string), `${a.resource}/${a.name}`).toBe(
          true,
        );
    });

    it('the key service has no Kubernetes API access: no token mounted, no binding to its account', () => {
      const pod = workload('Deployment', 'key-service');
      expect(pod.automountServiceAccountToken).toBe(false);
      const account = pod.serviceAccountName ?? 'default';
      const bound = objects.filter(
        (o) =>
          (o.kind === 'RoleBinding' || o.kind === 'ClusterRoleBinding') &&
          o.subjects.some((s: Obj) => s.kind === 'ServiceAccount' && s.name === account),
      );
      expect(bound).toEqual([]);
      // The join service's own pod, in contrast, runs under the account its Role and ClusterRole bind.
      expect(workload('DaemonSet', 'join-service').serviceAccountName).toBe('join-service');
    });
  },
);

describe('docs/identity.md', () => {
  it('shows the DiskBinding CRD the generator renders (labels aside)', () => {
    const doc = readFileSync(resolve(import.meta.dirname, '../../docs/identity.md'), 'utf8');
    const block = /```yaml\n((?:.*\n)*?kind: CustomResourceDefinition\n(?:.*\n)*?)\s*```/.exec(
      doc.replace(/^ {2}/gm, ''),
    )?.[1];
    expect(block, 'the CRD yaml block').toBeDefined();
    const { labels: _labels, ...metadata } = diskBindingCrd().metadata ?? {};
    expect(parseYaml(block as string)).toEqual({ ...diskBindingCrd(), metadata });
  });
});
