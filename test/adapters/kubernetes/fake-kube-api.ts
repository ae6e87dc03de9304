/** The SIMULATED Kubernetes API server lives in src (confboot mini runs it in its control-plane VM). */
export * from '../../../src/testbed/simulated/simulated-kube-api.js';
