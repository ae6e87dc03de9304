import { describe, expect, it } from 'vitest';
import { KUBELET_CLIENT_SIGNER, KubeletCsrs } from '../../src/ports/kubelet-csrs.js';

describe('KubeletCsrs port', () => {
  it('has a global DI token of its own name', () => {
    expect(KubeletCsrs).toBe(Symbol.for('confboot.KubeletCsrs'));
  });
});

describe('KUBELET_CLIENT_SIGNER', () => {
  it("is the signer kube-controller-manager uses for kubelets' client certificates", () => {
    expect(KUBELET_CLIENT_SIGNER).toBe('kubernetes.io/kube-apiserver-client-kubelet');
  });
});
