/**
 * Names of Kubernetes objects that several parts of confboot must agree on. No imports, so the
 * simulated API server in the mini guest bundle can use it without loading @kubernetes/client-node.
 */

/** The Opaque Secret in kube-system holding the master secret and its salt (upstream's name). */
export const MASTER_SECRET_NAME = 'constellation-mastersecret';
