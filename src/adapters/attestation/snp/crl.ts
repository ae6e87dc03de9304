/**
 * AMD's certificate revocation lists for SEV-SNP (KDS `/{vcek|vlek}/v1/{Product}/crl`): the CRL must
 * be signed by the pinned ARK (or by the ASK/ASVK of the chain, whichever its issuer names), be
 * within its validity window, and list neither the ASK/ASVK nor the VCEK/VLEK that signed the report.
 */
import type { X509Certificate } from 'node:crypto';
import { messageOf } from '../../../ports/errors.js';
import type { AttestationCheck } from '../../../ports/types.js';
import { commonName } from '../shared/certs.js';
import { normSerial, parseCrl } from '../shared/crl.js';

/** The certificates a report's revocation check looks at. */
export interface SnpRevocationSubjects {
  /** The pinned ARK. */
  ark: X509Certificate;
  /** The ASK (VCEK chain) or ASVK (VLEK chain) used to verify the signer. */
  ask: X509Certificate | undefined;
  /** The VCEK or VLEK that signed the report. */
  signer: X509Certificate;
}

/** The `amd-crl` check for `crlDer` at `at`. Never throws. */
export async function checkAmdCrl(
  crlDer: Uint8Array,
  subjects: SnpRevocationSubjects,
  at: Date,
): Promise<AttestationCheck> {
  const fail = (detail: string): AttestationCheck => ({ name: 'amd-crl', ok: false, detail });
  let crl: Awaited<ReturnType<typeof parseCrl>>;
  try {
    crl = await parseCrl(crlDer);
  } catch (err) {
    return fail(`AMD CRL cannot be parsed: ${messageOf(err)}`);
  }
  const issuerCn = commonName(crl.issuer.split(/,\s*/).join('\n'));
  const arkCn = commonName(subjects.ark.subject);
  const askCn = subjects.ask === undefined ? undefined : commonName(subjects.ask.subject);
  const issuer = issuerCn === arkCn ? subjects.ark : issuerCn === askCn ? subjects.ask : undefined;
  if (issuer === undefined)
    return fail(
      `AMD CRL is issued by ${JSON.stringify(issuerCn)}, want ${arkCn}${askCn ? ` or ${askCn}` : ''}`,
    );
  if (!(await crl.verify(issuer)))
    return fail(
      `AMD CRL signature does not verify with the ${issuer === subjects.ark ? 'pinned ' : ''}${issuerCn}`,
    );
  const t = at.getTime();
  if (crl.thisUpdate.getTime() > t)
    return fail(
      `AMD CRL is not valid yet at ${at.toISOString()} (thisUpdate ${crl.thisUpdate.toISOString()})`,
    );
  if (crl.nextUpdate !== undefined && crl.nextUpdate.getTime() < t)
    return fail(`AMD CRL expired at ${crl.nextUpdate.toISOString()} (now ${at.toISOString()})`);
  for (const cert of [subjects.ask, subjects.signer]) {
    if (cert === undefined) continue;
    const serial = normSerial(cert.serialNumber);
    if (crl.revoked.has(serial))
      return fail(`${commonName(cert.subject)} serial ${serial} is revoked by the ${issuerCn} CRL`);
  }
  return {
    name: 'amd-crl',
    ok: true,
    detail: `${issuerCn} CRL of ${crl.thisUpdate.toISOString()} lists neither ${[
      subjects.ask,
      subjects.signer,
    ]
      .filter((c) => c !== undefined)
      .map((c) => commonName(c.subject))
      .join(' nor ')}`,
  };
}
