/**
 * The CLI's command table. Each entry loads its module lazily, so `confboot --help` and a node for
 * one cloud never load code (or cloud SDKs) they do not use. Add one line per command. `demo` and
 * `mini` are the testbed's (src/testbed, only in a clone of the repository), loaded by testbed.ts.
 */
import type { CommandEntry } from './command.js';
import { loadTestbedCommand } from './testbed.js';

export const COMMANDS: CommandEntry[] = [
  {
    name: 'apply',
    summary: 'Bring a cluster up through its Kubernetes API after init (idempotent server-side apply)',
    load: () => import('./apply.js'),
  },
  {
    name: 'attestation',
    summary: 'Verify attestation evidence offline (vTPM, SEV-SNP, TDX)',
    load: () => import('./attestation.js'),
  },
  {
    name: 'bootstrapper',
    summary: "Run a node's bootstrapper: init server and join client side by side on one node lock",
    load: () => import('./bootstrapper.js'),
  },
  {
    name: 'copy-pki',
    summary: 'Copy the pki files the join service reads into a directory its user owns (its init container)',
    load: () => import('./copy-pki.js'),
  },
  {
    name: 'demo',
    summary: 'Run the whole flow on loopback with real TPMs and LUKS2 disks (kubeadm simulated)',
    load: () => loadTestbedCommand('demo'),
  },
  {
    name: 'init',
    summary: "Initialise a cluster on its first node after verifying the node's attestation",
    load: () => import('./init.js'),
  },
  {
    name: 'join-service',
    summary: 'Serve join tickets to attested nodes (attested gRPC, health, metrics, audit log)',
    load: () => import('./join-service.js'),
  },
  {
    name: 'measurements',
    summary: "Expected measurements from a reference node's event log (from-event-log, diff)",
    load: () => import('./measurements.js'),
  },
  {
    name: 'node-operator',
    summary: 'Approve kubelet CSRs only for their join ticket, tidy JoiningNodes and DiskBindings',
    load: () => import('./node-operator.js'),
  },
  {
    name: 'receipt',
    summary:
      "Join receipts: verify one against the receipt key's JWKS (pinned), or print that JWKS, kid and thumbprint from the cluster",
    load: () => import('./receipt.js'),
  },
  { name: 'key-service', summary: 'Serve HKDF data keys over gRPC', load: () => import('./key-service.js') },
  {
    name: 'manifests',
    summary: 'Render the Kubernetes manifests for a cloud and attestation variant',
    load: () => import('./manifests.js'),
  },
  {
    name: 'mini',
    summary: 'The same flow on real QEMU VMs: measured boot, vTPM quotes, dm-crypt, private network',
    load: () => loadTestbedCommand('mini'),
  },
  {
    name: 'recover',
    summary:
      'Recover a control plane after a full outage: the master secret, or one k-of-n share, to an attested node',
    load: () => import('./recover.js'),
  },
  {
    name: 'recovery-shares',
    summary: 'Split the master secret into a new set of k-of-n recovery share files (rotate holders)',
    load: () => import('./recovery-shares.js'),
  },
  {
    name: 'status',
    summary: 'Show every node of a running cluster as it records them, and whether each is in policy',
    load: () => import('./status.js'),
  },
  {
    name: 'ssh',
    summary: 'Sign a short-lived emergency SSH user certificate with the cluster CA (from the master secret)',
    load: () => import('./ssh.js'),
  },
  {
    name: 'verify',
    summary: 'Check a running node live: a fresh nonce to its verification service, the attestation verified',
    load: () => import('./verify.js'),
  },
  {
    name: 'metadata-server',
    summary: 'Serve QEMU-style instance metadata from a dnsmasq leases file',
    load: () => import('../operator/metadata-server.js'),
  },
];
