/**
 * `confboot apply` sends the manifests' objects through @kubernetes/client-node, which serialises
 * each with the model of its kind and drops fields the model does not know by their JSON name
 * (NetworkPolicy `from`, `x-kubernetes-preserve-unknown-fields`). What it sends must be what
 * `confboot manifests` renders, field for field, or a NetworkPolicy admits everyone and a CRD
 * prunes its spec. dumpYaml is client-node's own serialiser of that request body.
 */
import { dumpYaml, type KubernetesObject } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { type BringupInput, bringupObjects } from '../../src/app/bringup/objects.js';
import { deployTargets, renderObjects } from '../../src/app/manifests/manifests.js';
import { clusterIdFromMaster } from '../../src/domain/key-derivation.js';

const input = (target: ReturnType<typeof deployTargets>[0]): BringupInput => ({
  ...target,
  masterSecret: Buffer.alloc(32, 1),
  masterSalt: Buffer.alloc(32, 2),
  measurementSalt: Buffer.alloc(32, 3),
  attestationConfig: '{"measurements": {"4": {"expected": "aa", "warnOnly": false}}}\n',
  components: [],
  kubernetesVersion: 'v1.31.1',
});
const id = (o: KubernetesObject) => `${o.kind}/${o.metadata?.name}`;
const wire = (o: KubernetesObject) => parse(dumpYaml(o));

describe.each(deployTargets())('confboot apply for $cloud / $variant', (target) => {
  it('sends every object of the manifests as rendered (with the cluster’s own config, salt and ID)', () => {
    const sent = new Map(bringupObjects(input(target)).map((b) => [id(b.object), wire(b.object)]));
    const { masterSecret, masterSalt, measurementSalt } = input(target);
    const clusterId = clusterIdFromMaster(masterSecret, masterSalt, measurementSalt);
    const rendered = renderObjects({
      ...target,
      attestationConfig: input(target).attestationConfig,
      measurementSalt,
      clusterId,
    });
    expect(sent.get('ConfigMap/join-config')?.data.clusterId).toBe(
      `${Buffer.from(clusterId).toString('hex')}\n`,
    );
    for (const { object } of rendered)
      expect(sent.get(id(object)), id(object)).toEqual(JSON.parse(JSON.stringify(object)));
  });

  it('keeps the NetworkPolicy’s peers and the update CRDs’ open schemas', () => {
    const sent = bringupObjects(input(target)).map((b) => wire(b.object));
    const policy = sent.find((o) => o.kind === 'NetworkPolicy');
    expect(policy.spec.ingress[0].from).toEqual([
      { podSelector: { matchLabels: { 'app.kubernetes.io/name': 'join-service' } } },
    ]);
    const nodeVersion = sent.find((o) => o.metadata.name === 'nodeversions.update.edgeless.systems');
    expect(nodeVersion.spec.versions[0].schema.openAPIV3Schema.properties.spec).toEqual({
      type: 'object',
      'x-kubernetes-preserve-unknown-fields': true,
    });
  });
});
