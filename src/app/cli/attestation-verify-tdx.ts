/**
 * `confboot attestation verify-tdx`: verifies one Intel TDX quote (v4/v5) — quote and QE signatures,
 * the PCK chain to the Intel SGX root (`--root`, or the chain's own root when it carries Intel's
 * key, intel-root-pin.ts) and, with --collateral (a directory, offline,
 * or Intel PCS / a mirror), TCB info, QE identity and CRLs — and prints every check. Exit 0
 * accepted, 1 rejected, 2 usage or input error (including collateral that cannot be read or fetched).
 */
import { keyPinCheck, loadCertificate, loadCertificates } from '../../adapters/attestation/shared/certs.js';
import { loadTdxCollateralDir, type TdxCollateral } from '../../adapters/attestation/tdx/collateral.js';
import { parseTdxCollateralSource, tdxCollateralGetter } from '../../adapters/attestation/tdx/config.js';
import { INTEL_SGX_ROOT_SPKI_SHA256 } from '../../adapters/attestation/tdx/intel-root-pin.js';
import { INTEL_PCS_BASE_URL, INTEL_ROOT_CA_CRL_URL } from '../../adapters/attestation/tdx/pcs-client.js';
import { parseTdxQuote, tdxMeasurements } from '../../adapters/attestation/tdx/quote.js';
import { type TdxPolicy, verifyTdxQuote } from '../../adapters/attestation/tdx/verify.js';
import { SystemClock } from '../../adapters/system/system-clock.js';
import { messageOf } from '../../ports/errors.js';
import type { AttestationCheck } from '../../ports/types.js';
import { runCommand, UsageError } from '../program/args.js';
import { readInput } from '../program/input-file.js';
import { defineCommand, oneOf, parseOptions } from '../program/options.js';
import { printResult } from '../program/output.js';
import { OUTPUT_OPTION } from '../program/shared-options.js';
import { parseAt } from './attestation-verify-snp.js';

const spec = defineCommand({
  name: 'attestation verify-tdx',
  summary: 'Verify an Intel TDX quote (v4 or v5) and list every check.',
  options: {
    'tcb-level': {
      type: 'string',
      valueName: 'report|enforce',
      default: 'report',
      description:
        'with collateral: report the TCB level matched in the TCB info, as go-tdx-guest verify does (report), or reject a quote whose level is not accepted (enforce; the join service always enforces)',
      parse: oneOf(['report', 'enforce']),
    },
    quote: {
      type: 'string',
      valueName: 'F',
      required: true,
      description: 'TDX quote, binary or base64 (padding after the quote is ignored)',
    },
    root: {
      type: 'string',
      valueName: 'F',
      description:
        "trusted Intel SGX Root CA certificate, PEM or DER; default: the root of the quote's PCK chain, accepted only with Intel's root key (built-in pin)",
    },
    collateral: {
      type: 'string',
      valueName: 'DIR|pcs[:URL]',
      description: `collateral: a directory with TCB info, QE identity, their issuer chains and both CRLs (tcb_info.json, qe_identity.json, *_issuer_chain.pem, pck_crl.der, root_crl.der, or go-tdx-guest testdata names), or fetched from Intel PCS (pcs = ${INTEL_PCS_BASE_URL}; pcs:URL = a mirror or PCCS with the same v4 paths)`,
    },
    'root-crl-url': {
      type: 'string',
      valueName: 'URL',
      description: `with --collateral pcs[:URL]: where the Intel SGX Root CA CRL is fetched (default ${INTEL_ROOT_CA_CRL_URL})`,
    },
    at: {
      type: 'string',
      valueName: 'RFC3339',
      description: 'time at which certificates and collateral must be valid (default now)',
      parse: (raw: string) => parseAt(raw),
    },
    'report-data': {
      type: 'string',
      valueName: 'HEX',
      description: 'expected report_data (zero-padded to 64 bytes)',
      parse: (raw: string) => {
        const h = raw.replace(/^0x/, '');
        if (!/^([0-9a-fA-F]{2})*$/.test(h) || h.length > 128)
          throw new UsageError('--report-data must be at most 64 bytes of hex');
        return Buffer.from(h, 'hex');
      },
    },
    'accept-tcb-status': {
      type: 'string',
      multiple: true,
      valueName: 'STATUS',
      description: 'accepted TCB status (default UpToDate); repeatable',
    },
    'allow-debug': { type: 'boolean', description: 'accept a TD with the DEBUG attribute' },
    output: OUTPUT_OPTION,
  },
  exitCodes: { 0: 'accepted', 1: 'rejected' },
});

/** Runs `confboot attestation verify-tdx`. */
export async function run(argv: string[]): Promise<number> {
  return runCommand(async () => {
    const values = parseOptions(argv, spec);
    if (values === undefined) return 0;
    const at = values.at ?? new Date();
    let quote = await readInput(values.quote, 'quote');
    const text = quote.toString('latin1').trim();
    if (text.length > 0 && /^[A-Za-z0-9+/=\r\n]+$/.test(text)) quote = Buffer.from(text, 'base64');
    let root: ReturnType<typeof loadCertificate>;
    let pinCheck: AttestationCheck | undefined;
    try {
      if (values.root !== undefined)
        root = loadCertificate(await readInput(values.root, 'root'), 'Intel SGX root');
      else {
        // Without --root the chain's own root is used, and trusted only with Intel's key.
        const chain = loadCertificates(parseTdxQuote(quote).pckChainPem, 'PCK certificate chain');
        const last = chain.at(-1);
        if (last === undefined) throw new Error('the quote carries no PCK certificate chain; pass --root');
        root = last;
        pinCheck = keyPinCheck('root-pin', last, INTEL_SGX_ROOT_SPKI_SHA256, {
          key: "Intel's SGX Root CA key",
          found: "the PCK chain's root",
        });
      }
    } catch (err) {
      if (err instanceof UsageError) throw err;
      throw new UsageError(`${values.root === undefined ? `quote ${values.quote}: ` : ''}${messageOf(err)}`);
    }
    const policy: TdxPolicy = {
      allowDebug: values['allow-debug'],
      enforceTcbLevel: values['tcb-level'] === 'enforce',
    };
    const statuses = values['accept-tcb-status'];
    if (statuses !== undefined) policy.acceptedTcbStatuses = statuses;
    if (values['report-data'] !== undefined) policy.reportData = values['report-data'];
    let v = await verifyTdxQuote(quote, { root, policy, at });
    if (v.quote === undefined)
      throw new UsageError(`quote ${values.quote}: ${v.checks[0]?.detail ?? 'unreadable'}`);
    const rootCrlUrl = values['root-crl-url'];
    if (values.collateral === undefined && rootCrlUrl !== undefined)
      throw new UsageError('--root-crl-url needs --collateral pcs[:URL]');
    if (values.collateral !== undefined) {
      let collateral: TdxCollateral;
      try {
        const source = parseTdxCollateralSource(values.collateral, rootCrlUrl);
        const fmspc = v.pck ? Buffer.from(v.pck.fmspc).toString('hex') : undefined;
        if (source.kind === 'dir') collateral = await loadTdxCollateralDir(source.dir, fmspc);
        else if (fmspc === undefined)
          throw new Error(
            'the quote has no readable PCK certificate, so there is no FMSPC to fetch collateral for',
          );
        else collateral = await tdxCollateralGetter(source, new SystemClock())(fmspc);
      } catch (err) {
        throw new UsageError(`--collateral: ${messageOf(err)}`);
      }
      v = await verifyTdxQuote(quote, { root, policy, at, collateral });
    }
    if (pinCheck !== undefined)
      v = { ...v, checks: [pinCheck, ...v.checks], accepted: v.accepted && pinCheck.ok };
    const q = v.quote;
    const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');
    const measurements = q
      ? Object.fromEntries([...tdxMeasurements(q.body)].map(([i, m]) => [String(i), hex(m)]))
      : undefined;
    const result = {
      accepted: v.accepted,
      at: at.toISOString(),
      checks: v.checks,
      quote: q && {
        version: q.version,
        teeTcbSvn: hex(q.body.teeTcbSvn),
        mrSeam: hex(q.body.mrSeam),
        reportData: hex(q.body.reportData),
        measurements,
      },
      fmspc: v.pck && hex(v.pck.fmspc),
    };
    return printResult(values.output, 'attestation verify-tdx', v.accepted ? 0 : 1, result, (r) =>
      [
        ...r.checks.map((c) => `${c.ok ? 'PASS' : 'FAIL'}  ${c.name}: ${c.detail ?? ''}`),
        r.accepted ? 'ACCEPTED' : 'REJECTED',
      ].join('\n'),
    );
  });
}

/** The command's option table. */
export const commandSpecs = [spec];
