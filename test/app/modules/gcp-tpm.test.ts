/**
 * The GCP node module gives the node's TPM GCE's attestation key (the gcp line of the cloud registry sets its
 * TPM defaults, the common module's TPM takes them). On a REAL swtpm with GCE's provisioning SIMULATED (a GCE-style AK
 * template written to NV index 0x01c10001): a gcp node's TPM key is the endorsement primary of that
 * template, made here independently with tpm2-tools; a node of another cloud keeps confboot's own AK.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { GCE_AK_TEMPLATE_NV_INDEX_RSA } from '../../../src/adapters/tpm/nv-template-ak.js';
import { matchesRsaAkTemplate } from '../../../src/adapters/tpm/tpm-structures.js';
import { createNodeContainer } from '../../../src/app/modules/index.js';
import { isConfbootError } from '../../../src/ports/errors.js';
import { Tpm } from '../../../src/ports/tpm.js';
import { tpm2 } from '../../adapters/tpm/tpm-test-helpers.js';
import { writeNvIndex } from '../../support/azure-hcl.js';
import { useSwtpm } from '../../support/swtpm.js';
import { useTmpDirs } from '../../support/tmp.js';

/** go-tpm-tools' AKTemplateRSA marshalled: RSA-2048 restricted RSASSA-SHA256 signer, empty unique. */
const GCE_RSA_TEMPLATE = Buffer.from('0001000b00050072000000100014000b0800000000000000', 'hex');

describe('gcp nodes quote with GCE’s AK (SIMULATED GCE template on a real swtpm)', {
  timeout: 60_000,
}, () => {
  const swtpm = useSwtpm();
  const tmp = useTmpDirs();

  const nodeTpm = async (csp: string, variant: string, tcti: string, akHandle?: number) => {
    const container = await createNodeContainer({
      csp,
      variant,
      tcti,
      diskDevice: '/dev/null',
      logLevel: 'silent',
      ...(akHandle === undefined ? {} : { akHandle }),
    });
    return container.getAsync<Tpm>(Tpm);
  };

  it.each(['gcp-sev-es', 'gcp-sev-snp'])(
    'a %s node’s AK is the endorsement primary of NV 0x01c10001',
    async (variant) => {
      const sw = await swtpm();
      const dir = tmp();
      await writeNvIndex(sw.tcti, GCE_AK_TEMPLATE_NV_INDEX_RSA, GCE_RSA_TEMPLATE);
      await tpm2(sw.tcti, 'tpm2_createprimary', [
        ...['-C', 'e', '-G', 'rsa2048:rsassa-sha256:null', '-g', 'sha256', '-a', '0x00050072'],
        ...['-c', join(dir, 'ref.ctx'), '-f', 'tpmt', '-o', join(dir, 'ref.pub')],
      ]);
      await tpm2(sw.tcti, 'tpm2_flushcontext', ['-t']);
      const expected = readFileSync(join(dir, 'ref.pub'));

      const pub = Buffer.from(
        await (await nodeTpm('gcp', variant, sw.tcti, 0x81008f42)).attestationKeyPublic(),
      );
      expect(pub.equals(expected)).toBe(true);
      expect(await tpm2(sw.tcti, 'tpm2_getcap', ['handles-persistent'])).toMatch(/0x81008F42/i);
    },
  );

  it('without GCE’s template a gcp node refuses to attest instead of making its own key', async () => {
    const sw = await swtpm();
    const err = await (await nodeTpm('gcp', 'gcp-sev-es', sw.tcti))
      .attestationKeyPublic()
      .catch((e: unknown) => e);
    expect(isConfbootError(err) && [err.code, err.message]).toEqual([
      'failed-precondition',
      expect.stringMatching(/NV index 0x1c10001 \(the AK template\) is not defined on this TPM/),
    ]);
    expect(await tpm2(sw.tcti, 'tpm2_getcap', ['handles-persistent'])).toBe('');
  });

  it('a node of another cloud keeps confboot’s own owner-hierarchy AK on the same TPM', async () => {
    const sw = await swtpm();
    await writeNvIndex(sw.tcti, GCE_AK_TEMPLATE_NV_INDEX_RSA, GCE_RSA_TEMPLATE);
    const pub = await (await nodeTpm('qemu', 'qemu-vtpm', sw.tcti)).attestationKeyPublic();
    expect(matchesRsaAkTemplate(pub)).toBe(true);
  });
});
