/**
 * A node's configuration with its defaults filled in: upstream's paths, the kernel resource
 * manager's TPM device, log level info; what the input sets is kept, what it leaves out stays out,
 * and an empty state disk device is refused.
 */
import { describe, expect, it } from 'vitest';
import { withNodeDefaults } from '../../../src/app/registry/node-config.js';

describe('withNodeDefaults', () => {
  it("fills in upstream's paths, the TPM resource manager and log level info", () => {
    expect(
      withNodeDefaults({ csp: 'gcp', variant: 'gcp-sev-es', diskDevice: '/dev/sdb' }, 'gcp', 'gcp-sev-es'),
    ).toEqual({
      csp: 'gcp',
      variant: 'gcp-sev-es',
      tcti: 'device:/dev/tpmrm0',
      diskDevice: '/dev/sdb',
      paths: {
        nodeState: '/run/state/constellation/node_state.json',
        pkiDir: '/etc/kubernetes/pki',
        kubeletCertPath: '/run/state/kubelet/pki/kubelet-client-crt.pem',
        kubeletKeyPath: '/run/state/kubelet/pki/kubelet-client-key.pem',
      },
      metadata: {},
      logLevel: 'info',
    });
  });

  it('keeps every value the input sets, path by path', () => {
    const config = withNodeDefaults(
      {
        csp: 'QEMU',
        variant: 'qemu-vtpm',
        diskDevice: '/tmp/state.img',
        tcti: 'swtpm:port=2321',
        akHandle: 0x81000003,
        initialPassphrasePath: '/tmp/key',
        paths: { pkiDir: '/tmp/pki' },
        metadata: { baseUrl: 'http://127.0.0.1:8080' },
        kubeadmPath: '/opt/kubeadm',
        logLevel: 'debug',
      },
      'qemu',
      'qemu-vtpm',
    );
    expect(config).toMatchObject({
      csp: 'qemu',
      tcti: 'swtpm:port=2321',
      akHandle: 0x81000003,
      initialPassphrasePath: '/tmp/key',
      metadata: { baseUrl: 'http://127.0.0.1:8080' },
      kubeadmPath: '/opt/kubeadm',
      logLevel: 'debug',
    });
    expect(config.paths.pkiDir).toBe('/tmp/pki');
    expect(config.paths.nodeState).toBe('/run/state/constellation/node_state.json');
  });

  it('copies the metadata settings rather than sharing them', () => {
    const metadata = { baseUrl: 'http://a' };
    const config = withNodeDefaults(
      { csp: 'qemu', variant: 'qemu-vtpm', diskDevice: '/d', metadata },
      'qemu',
      'qemu-vtpm',
    );
    metadata.baseUrl = 'http://b';
    expect(config.metadata.baseUrl).toBe('http://a');
  });

  it('refuses an empty state disk device', () => {
    expect(() =>
      withNodeDefaults({ csp: 'qemu', variant: 'qemu-vtpm', diskDevice: '' }, 'qemu', 'qemu-vtpm'),
    ).toThrow(
      expect.objectContaining({
        code: 'invalid-argument',
        message: 'node config: state disk device is empty',
      }),
    );
  });
});
