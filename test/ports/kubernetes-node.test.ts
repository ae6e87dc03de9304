/**
 * Node names and the kubelet CSR subject: names fold to lower case with `-` for `_` and must then be
 * RFC 1123 subdomains; the subject must be exactly `O=system:nodes` then `CN=system:node:<name>`,
 * one attribute per RDN, by name or by OID; the control-plane file names are the eight kubeadm
 * shares.
 */
import { describe, expect, it } from 'vitest';
import {
  CONTROL_PLANE_FILE_NAMES,
  foldNodeName,
  KUBELET_CSR_CN_PREFIX,
  KUBELET_CSR_ORGANIZATION,
  kubeletSubjectProblem,
  normalizeNodeName,
} from '../../src/ports/kubernetes-node.js';

describe('node names', () => {
  it('folds case and underscores', () => {
    expect(foldNodeName('Worker_1.Zone_A')).toBe('worker-1.zone-a');
  });

  it.each([
    ['worker-0', 'worker-0'],
    ['Control_Plane_0', 'control-plane-0'],
    ['a.b.c', 'a.b.c'],
    ['x'.repeat(63), 'x'.repeat(63)],
  ])('accepts %j as %j', (name, normalized) => {
    expect(normalizeNodeName(name)).toBe(normalized);
  });

  it.each([
    ['', 'empty'],
    ['-worker', 'leading hyphen'],
    ['worker-', 'trailing hyphen'],
    ['a..b', 'empty label'],
    ['a/b', 'slash'],
    ['x'.repeat(64), 'label over 63'],
    [`${'a'.repeat(63)}.`.repeat(4).slice(0, 254), 'name over 253'],
    ['wörker', 'non-ASCII'],
  ])('refuses %j (%s) as invalid-argument', (name) => {
    expect(() => normalizeNodeName(name)).toThrow(/is not a valid RFC 1123 name after normalisation/);
  });
});

describe('kubeletSubjectProblem', () => {
  const O = { type: 'O', value: KUBELET_CSR_ORGANIZATION };
  const CN = { type: 'CN', value: `${KUBELET_CSR_CN_PREFIX}worker-0` };

  it('finds no problem in O=system:nodes, CN=system:node:<name>, by name or by OID', () => {
    expect(kubeletSubjectProblem([[O], [CN]])).toBeUndefined();
    expect(
      kubeletSubjectProblem([
        [{ type: '2.5.4.10', value: 'system:nodes' }],
        [{ type: '2.5.4.3', value: CN.value }],
      ]),
    ).toBeUndefined();
  });

  it.each([
    ['a multi-valued RDN', [[O, CN]], 'subject RDN 1 holds 2 attributes'],
    [
      'another attribute',
      [[O], [CN], [{ type: 'OU', value: 'x' }]],
      'subject may hold only O and CN, also has OU',
    ],
    [
      'a second organization',
      [[O], [{ type: 'O', value: 'system:masters' }], [CN]],
      'organization must be exactly',
    ],
    ['no organization', [[CN]], 'organization must be exactly ["system:nodes"], is []'],
    ['two common names', [[O], [CN], [CN]], 'subject must have exactly one common name, has 2'],
    ['CN before O', [[CN], [O]], 'subject must be O=system:nodes followed by CN=system:node:<name>'],
    [
      'a CN without the prefix',
      [[O], [{ type: 'CN', value: 'admin' }]],
      'common name must start with "system:node:"',
    ],
    ['an empty subject', [], 'organization must be exactly'],
  ])('names the problem with %s', (_n, subject, problem) => {
    expect(kubeletSubjectProblem(subject)).toContain(problem);
  });
});

describe('CONTROL_PLANE_FILE_NAMES', () => {
  it('are the kubeadm CA keys and certificates a joining control plane needs, frozen', () => {
    expect([...CONTROL_PLANE_FILE_NAMES].sort()).toEqual(
      [
        'ca.crt',
        'ca.key',
        'etcd/ca.crt',
        'etcd/ca.key',
        'front-proxy-ca.crt',
        'front-proxy-ca.key',
        'sa.key',
        'sa.pub',
      ].sort(),
    );
    expect(Object.isFrozen(CONTROL_PLANE_FILE_NAMES)).toBe(true);
  });
});
