import type { CallOptions } from './types.js';

/** The node's kubelet as a service (production: systemd). */
export interface KubeletService {
  /**
   * Restarts the kubelet from the node's existing state (a node that was bootstrapped before and
   * rebooted; kubeadm does not run again).
   */
  restartKubelet(options?: CallOptions): Promise<void>;
}

/** DI token for {@link KubeletService}. */
export const KubeletService = Symbol.for('confboot.KubeletService');
