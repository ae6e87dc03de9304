import type { CallOptions, Component } from './types.js';

/** What {@link ComponentInstaller.install} did with one component. */
export interface InstalledComponent {
  /** The component's install path. */
  installPath: string;
  /** `downloaded` when fetched and checked now, `present` when the file already had the hash. */
  how: 'downloaded' | 'present';
}

/**
 * Installs the Kubernetes components a cluster vouches for (kubelet, kubeadm, kubectl, CNI
 * plugins, crictl) before kubeadm runs: each is fetched from its URL and its `sha256:` hash checked
 * before anything is written where it would run. A node must not run a binary whose hash the
 * cluster did not agree on.
 */
export interface ComponentInstaller {
  /**
   * Installs every component in order. Rejects, with nothing of that component installed, when a
   * download's hash differs (`failed-precondition`, naming the component and both hashes), when an
   * entry is malformed (`invalid-argument`), or when a download fails after its retries
   * (`unavailable`). Components installed before the failing one stay installed (each was checked).
   */
  install(components: readonly Component[], options?: CallOptions): Promise<InstalledComponent[]>;
}

/** DI token of {@link ComponentInstaller}. */
export const ComponentInstaller = Symbol.for('confboot.ComponentInstaller');
