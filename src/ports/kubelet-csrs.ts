import type { CallOptions } from './types.js';

/** Signer of kubelet client certificates (kube-controller-manager signs what is approved). */
export const KUBELET_CLIENT_SIGNER = 'kubernetes.io/kube-apiserver-client-kubelet';

/** One pending CertificateSigningRequest for {@link KUBELET_CLIENT_SIGNER}, as read from the API. */
export interface KubeletCsrRecord {
  /** The CertificateSigningRequest's name. */
  name: string;
  /** Who created it, as the API server authenticated them (`spec.username`, `spec.groups`). */
  username: string;
  groups: string[];
  /** `spec.usages`. */
  usages: string[];
  /** The request's subject: every common name and organization, in order. */
  commonNames: string[];
  organizations: string[];
  /** Lower-case hex SHA-256 of the request's SubjectPublicKeyInfo (DER). */
  publicKeySha256: string;
  /** Why the request itself could not be read (not PEM, not a CSR, bad signature), when it could not. */
  unreadable?: string;
}

/** The kubelet client CSRs waiting for a decision, and the decision. */
export interface KubeletCsrs {
  /** CSRs for {@link KUBELET_CLIENT_SIGNER} with neither an Approved nor a Denied condition. */
  listPending(options?: CallOptions): Promise<KubeletCsrRecord[]>;
  /** Adds the Approved condition (`reason`, `message`). */
  approve(name: string, reason: string, message: string, options?: CallOptions): Promise<void>;
  /** Adds the Denied condition (`reason`, `message`): nothing will sign it. */
  deny(name: string, reason: string, message: string, options?: CallOptions): Promise<void>;
}

/** DI token for {@link KubeletCsrs}. */
export const KubeletCsrs = Symbol.for('confboot.KubeletCsrs');
