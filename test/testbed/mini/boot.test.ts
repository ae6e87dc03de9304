/**
 * One real QEMU VM (OVMF, TCG, swtpm vTPM) booting the mini node image: the in-VM agent quotes
 * through the kernel's resource manager (device:/dev/tpmrm0) and sends the firmware event log; the
 * host validates the qemu-vtpm document (quote signature, nonce, event-log replay against the quoted
 * PCRs) and checks that PCR 4 and PCR 9 equal what it computed from the kernel, command line and
 * initramfs alone. Skipped (with the reason) where qemu, swtpm or OVMF are missing.
 */
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseEventLog, replayEventLog } from '../../../src/adapters/attestation/eventlog/tcg-log.js';
import { decodeVtpmDocument } from '../../../src/adapters/attestation/shared/vtpm-document.js';
import { createValidator } from '../../../src/app/registry/validators.js';
import { MeasurementsPolicy } from '../../../src/domain/measurements.js';
import { bundleEntry } from '../../../src/testbed/mini/bundle.js';
import { GUEST_CONFIG_FW_CFG, REPORT_PREFIX } from '../../../src/testbed/mini/guest/protocol.js';
import { buildNodeImage, defaultCacheDir, type NodeImage } from '../../../src/testbed/mini/image.js';
import { computedPcrs } from '../../../src/testbed/mini/measurements.js';
import {
  createPrivateNetwork,
  listMiniNamespaces,
  type PrivateNetwork,
  sweepStaleNetworks,
} from '../../../src/testbed/vm/private-network.js';
import { OVMF_CODE, QemuVm } from '../../../src/testbed/vm/qemu-vm.js';

function have(cmd: string): boolean {
  try {
    execFileSync('sh', ['-c', `command -v ${cmd}`], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}
const missing = ['qemu-system-x86_64', 'swtpm', 'swtpm_setup', 'dpkg-deb', 'depmod', 'dnsmasq', 'ip'].filter(
  (c) => !have(c),
);
if (!existsSync(OVMF_CODE)) missing.push(OVMF_CODE);
// test/testbed/mini/lifecycle.test.ts proves the same on its VMs in `npm test`; this single-VM test (about two
// minutes under TCG) runs with CONFBOOT_MINI_ALL=1.
if (process.env.CONFBOOT_MINI_ALL !== '1') missing.push('CONFBOOT_MINI_ALL=1');
const CMDLINE = 'console=ttyS0 quiet panic=-1 no_timer_check';
const MEMORY = 1024;

describe.skipIf(missing.length > 0)(
  `mini: one VM on a private network, measured boot, a quote through /dev/tpmrm0${missing.length ? ` (missing ${missing.join(', ')})` : ''}`,
  () => {
    let image: NodeImage;
    let work: string;
    let vm: QemuVm | undefined;
    let net: PrivateNetwork | undefined;

    beforeAll(async () => {
      image = await buildNodeImage({ cacheDir: process.env.CONFBOOT_MINI_CACHE ?? defaultCacheDir() });
      work = mkdtempSync(join(tmpdir(), 'confboot-mini-test-'));
      await sweepStaleNetworks();
    }, 600_000);

    afterAll(async () => {
      await vm?.stop();
      await net?.destroy();
      if (work) rmSync(work, { recursive: true, force: true });
    });

    it('gets its address from dnsmasq, is known to the metadata server, quotes through device:/dev/tpmrm0; the event log replays to the quoted PCRs; PCR 4 and 9 are the computed ones', async () => {
      const tpmDir = join(work, 'tpm');
      mkdirSync(tpmDir);
      execFileSync('swtpm_setup', ['--tpm2', '--tpmstate', tpmDir, '--createek', '--overwrite'], {
        stdio: 'ignore',
      });

      // The private network: namespace, bridge, tap, dnsmasq and the metadata server inside it.
      net = await createPrivateNetwork({ workDir: work });
      const slot = await net.addSlot('control-plane-0');
      await net.startDhcp();
      const metadataBundle = join(work, 'metadata-server.mjs');
      writeFileSync(metadataBundle, await bundleEntry('host/metadata-entry'));
      net.spawnInside(
        'node',
        [metadataBundle, '--leases', net.leasesFile, '--listen', `${net.hostIp}:8080`],
        join(work, 'metadata.log'),
      );

      const nonce = randomBytes(32);
      const config = join(work, 'config.json');
      writeFileSync(
        config,
        JSON.stringify({
          step: 'attest',
          nonce: nonce.toString('hex'),
          metadataUrl: `http://${net.hostIp}:8080`,
        }),
      );
      vm = new QemuVm({
        name: 'control-plane-0',
        workDir: work,
        tpmStateDir: tpmDir,
        kernel: image.kernel,
        initrd: image.initrd,
        cmdline: CMDLINE,
        memoryMiB: MEMORY,
        accel: 'tcg',
        fwCfg: { [GUEST_CONFIG_FW_CFG]: config },
        nic: { tap: slot.tap, mac: slot.mac },
        netns: net.netns,
      });
      await vm.start();
      const report = await vm.waitForReport(
        REPORT_PREFIX,
        (r) => r.type === 'attestation' || r.type === 'error',
        { timeoutMs: 400_000 },
      );
      expect(report.type, JSON.stringify(report)).toBe('attestation');
      expect(report.tcti).toBe('device:/dev/tpmrm0');
      const document = Buffer.from(report.document as string, 'base64');

      // The VM got its address from dnsmasq, and the metadata server recognised it by that address.
      const meta = vm.reports(REPORT_PREFIX).find((r) => r.type === 'metadata');
      expect(meta?.status).toBe(200);
      expect(meta?.self).toMatchObject({ Name: 'control-plane-0', Role: 'ControlPlane', VPCIP: slot.ip });
      expect(readFileSync(net.leasesFile, 'utf8')).toContain(`${slot.mac} ${slot.ip} control-plane-0`);

      const expected = await computedPcrs(image.kernel, image.initrd, CMDLINE, MEMORY);
      const policy = new MeasurementsPolicy(
        new Map([...expected].map(([i, v]) => [i, { expected: new Uint8Array(v), warnOnly: false }])),
      );
      const validator = createValidator('qemu-vtpm', { policy });
      const result = await validator.validate(document, nonce);
      const eventLogCheck = result.checks.find((c) => c.name === 'event-log');
      expect(eventLogCheck?.detail).toMatch(/replays to the quoted SHA256 PCRs/);

      // The same facts, directly: the log's replay equals the quoted values for every PCR it touches.
      const doc = decodeVtpmDocument(document);
      const log = parseEventLog(doc.attestation.eventLog);
      const replayed = replayEventLog(log).get(11)!;
      const quoted = doc.attestation.quotes.find((q) => q.pcrHashAlg === 11)!.pcrs;
      for (const [pcr, value] of replayed)
        expect(Buffer.from(quoted.get(pcr)!).toString('hex')).toBe(Buffer.from(value).toString('hex'));
      for (const pcr of [4, 9]) expect(replayed.has(pcr)).toBe(true);

      // A different nonce does not validate (the quote is bound to this boot's request).
      await expect(validator.validate(document, randomBytes(32))).rejects.toThrow();
      await vm.waitForExit(60_000);

      // Cleanup removes the namespace with dnsmasq and the metadata server in it.
      const ns = net.netns;
      await net.destroy();
      net = undefined;
      expect((await listMiniNamespaces()).map((n) => n.name)).not.toContain(ns);
    }, 600_000);
  },
);
