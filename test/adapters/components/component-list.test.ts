/**
 * The JSON component list of the components ConfigMap and `confboot init --components`: parsed with
 * upstream's field names, missing strings empty and `extract` false, and anything else refused with
 * the caller's operation and code, naming the component.
 */
import { describe, expect, it } from 'vitest';
import { parseComponentList } from '../../../src/adapters/components/component-list.js';
import { isConfbootError } from '../../../src/ports/errors.js';

describe('parseComponentList', () => {
  it('reads url, hash, install_path and extract', () => {
    const json = JSON.stringify([
      {
        url: 'https://dl.k8s.io/v1.31.1/bin/linux/amd64/kubelet',
        hash: 'sha256:0123',
        install_path: '/run/state/bin/kubelet',
        extract: false,
      },
      { url: 'https://x/cni.tgz', hash: 'sha256:4567', install_path: '/opt/cni/bin', extract: true },
      {},
    ]);
    expect(parseComponentList(json, 'reading components')).toEqual([
      {
        url: 'https://dl.k8s.io/v1.31.1/bin/linux/amd64/kubelet',
        hash: 'sha256:0123',
        installPath: '/run/state/bin/kubelet',
        extract: false,
      },
      { url: 'https://x/cni.tgz', hash: 'sha256:4567', installPath: '/opt/cni/bin', extract: true },
      { url: '', hash: '', installPath: '', extract: false },
    ]);
    expect(parseComponentList('[]', 'x')).toEqual([]);
  });

  it.each([
    ['not JSON', '[{', 'reading components: not JSON: '],
    ['not a list', '{"url":"x"}', 'reading components: not a JSON list'],
    [
      'a component that is not an object',
      '[1]',
      'reading components: component 0 is not {url, hash, install_path, extract}',
    ],
    [
      'a null component',
      '[{}, null]',
      'reading components: component 1 is not {url, hash, install_path, extract}',
    ],
    [
      'extract as a string',
      '[{"extract":"true"}]',
      'reading components: component 0 is not {url, hash, install_path, extract}',
    ],
    ['a number for a string', '[{"url": 5}]', 'reading components: component 0: "url" is not a string'],
  ])('refuses %s with the operation and the default code', (_n, json, message) => {
    let err: unknown;
    try {
      parseComponentList(json, 'reading components');
    } catch (e) {
      err = e;
    }
    expect(isConfbootError(err) && err.code).toBe('invalid-argument');
    expect((err as Error).message.startsWith(message)).toBe(true);
  });

  it('refuses with the code the caller asks for', () => {
    expect(() => parseComponentList('{}', 'reading ConfigMap', 'failed-precondition')).toThrow(
      expect.objectContaining({ code: 'failed-precondition' }),
    );
  });
});
