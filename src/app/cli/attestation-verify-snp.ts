/**
 * `confboot attestation verify-snp`: verifies one SEV-SNP attestation report — signature by
 * the VCEK/VLEK, chain to the ARK (the operator's `--ark`, or the `--chain`'s ARK when it carries
 * AMD's key for the product, amd-ark-pins.ts), TCB, guest policy, ID key and report data — and
 * prints every check. Exit 0 accepted, 1 rejected, 2 usage or input error.
 */
import type { X509Certificate } from 'node:crypto';
import {
  commonName,
  keyPinCheck,
  loadCertificate,
  loadCertificates,
} from '../../adapters/attestation/shared/certs.js';
import { AMD_ARK_SPKI_SHA256 } from '../../adapters/attestation/snp/amd-ark-pins.js';
import { KdsCertFetcher } from '../../adapters/attestation/snp/kds-fetcher.js';
import type { IdKeyDigestEnforcement, SnpPolicy } from '../../adapters/attestation/snp/policy.js';
import {
  AMD_PRODUCTS,
  type AmdProduct,
  parseSnpReport,
  type SnpTcbParts,
} from '../../adapters/attestation/snp/report.js';
import { verifySnpReport } from '../../adapters/attestation/snp/verify.js';
import { messageOf } from '../../ports/errors.js';
import type { AttestationCheck } from '../../ports/types.js';
import { runCommand, UsageError } from '../program/args.js';
import { readInput } from '../program/input-file.js';
import { defineCommand, oneOf, parseOptions } from '../program/options.js';
import { printResult } from '../program/output.js';
import { OUTPUT_OPTION } from '../program/shared-options.js';

const spec = defineCommand({
  name: 'attestation verify-snp',
  summary: 'Verify an AMD SEV-SNP attestation report and list every check.',
  options: {
    report: {
      type: 'string',
      valueName: 'F',
      required: true,
      description: 'attestation report, binary or base64 (≥ 1184 bytes; trailing bytes ignored)',
    },
    signer: {
      type: 'string',
      valueName: 'F',
      required: true,
      description: 'VCEK or VLEK certificate, PEM or DER',
    },
    chain: {
      type: 'string',
      valueName: 'F',
      description:
        "PEM with the ASK (or ASVK) and the ARK, e.g. AMD KDS cert_chain; its ARK must equal --ark, or without --ark carry the built-in key of AMD's --product ARK",
    },
    ark: {
      type: 'string',
      valueName: 'F',
      description:
        "trusted ARK for --product, PEM/DER (an AMD cert_chain bundle also works; its ASK is used when --chain is absent); default: the ARK in --chain, accepted only with AMD's key for --product",
    },
    product: {
      type: 'string',
      valueName: 'P',
      default: 'milan',
      description: 'milan, genoa or turin',
      parse: oneOf(AMD_PRODUCTS),
    },
    at: {
      type: 'string',
      valueName: 'RFC3339',
      description: 'time at which certificates must be valid (default now)',
      parse: (raw: string) => parseAt(raw),
    },
    'report-data': {
      type: 'string',
      valueName: 'HEX',
      description: 'expected report_data (zero-padded to 64 bytes)',
      parse: (raw: string, flag: string) => {
        const data = parseHex(raw, `--${flag}`);
        if (data.length > 64) throw new UsageError('--report-data is longer than 64 bytes');
        return data;
      },
    },
    'deny-debug': {
      type: 'boolean',
      description:
        'reject a guest policy that allows debugging (by default it is reported, not enforced; the join service always rejects it)',
    },
    'allow-debug': { type: 'boolean', description: 'the default; kept for scripts that pass it' },
    'no-smt': { type: 'boolean', description: 'reject a guest policy that allows SMT' },
    vmpl: {
      type: 'string',
      valueName: 'N',
      default: '0',
      description: 'required VMPL',
      parse: (raw: string) => {
        if (!/^[0-3]$/.test(raw)) throw new UsageError('--vmpl must be 0..3');
        return Number(raw);
      },
    },
    'minimum-tcb': {
      type: 'string',
      valueName: 'TCB',
      description: 'minimum reported TCB, e.g. bl=2,tee=0,snp=5,ucode=68',
      parse: parseTcb,
    },
    'minimum-launch-tcb': {
      type: 'string',
      valueName: 'TCB',
      description: 'minimum launch TCB, same form',
      parse: parseTcb,
    },
    'id-key-digest': {
      type: 'string',
      multiple: true,
      valueName: 'HEX',
      description: 'accepted ID-key digest (48 bytes hex); repeatable',
      parse: (raw: string, flag: string) => parseHex(raw, `--${flag}`),
    },
    'id-key-enforcement': {
      type: 'string',
      valueName: 'E',
      default: 'equal',
      description: 'equal or warn-only',
      parse: oneOf(['equal', 'warn-only'] satisfies IdKeyDigestEnforcement[]),
    },
    'kds-url': {
      type: 'string',
      valueName: 'URL',
      default: 'https://kdsintf.amd.com',
      description:
        'AMD KDS or a mirror: with neither --chain nor --ark, the ASK (or ASVK) and ARK are fetched from its cert_chain',
    },
    output: OUTPUT_OPTION,
  },
  epilog: [
    'Trust: --ark pins the ARK; if --chain carries an ARK as well, it must be byte-identical to it.',
    "Without --ark, the ARK in --chain is used only if its public key is AMD's for --product",
    '(built-in SHA-256 pins of the Milan, Genoa and Turin ARK keys). The report never supplies one.',
  ].join('\n'),
  exitCodes: { 0: 'accepted', 1: 'rejected' },
});

/** Binary as is; text consisting only of base64 characters is decoded. */
function binaryOrBase64(data: Buffer): Buffer {
  const text = data.toString('latin1').trim();
  if (text.length > 0 && /^[A-Za-z0-9+/=\r\n]+$/.test(text)) return Buffer.from(text, 'base64');
  return data;
}

function parseHex(v: string, what: string): Buffer {
  const clean = v.replace(/^0x/, '');
  if (!/^([0-9a-fA-F]{2})*$/.test(clean)) throw new UsageError(`${what} is not hex: ${v}`);
  return Buffer.from(clean, 'hex');
}

function parseTcb(v: string, flag: string): SnpTcbParts {
  const what = `--${flag}`;
  const out: Partial<Record<keyof SnpTcbParts, number>> = {};
  for (const part of v.split(',')) {
    const m = /^(bl|tee|snp|ucode|fmc)=(\d{1,3})$/.exec(part.trim());
    const name = TCB_PARTS.find((p) => p === m?.[1]);
    if (m === null || name === undefined)
      throw new UsageError(`${what}: ${JSON.stringify(part)} is not name=number (bl, tee, snp, ucode, fmc)`);
    out[name] = Number(m[2]);
  }
  const { bl, tee, snp, ucode, fmc } = out;
  for (const [k, n] of Object.entries({ bl, tee, snp, ucode }))
    if (n === undefined) throw new UsageError(`${what}: missing ${k}`);
  return {
    bl: bl ?? 0,
    tee: tee ?? 0,
    snp: snp ?? 0,
    ucode: ucode ?? 0,
    ...(fmc === undefined ? {} : { fmc }),
  };
}

const TCB_PARTS = ['bl', 'tee', 'snp', 'ucode', 'fmc'] as const;

/** Parses an RFC 3339 time for --at. */
export function parseAt(v: string | undefined): Date {
  if (v === undefined) return new Date();
  if (!/^\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:\d{2}))?$/.test(v))
    throw new UsageError(`--at ${JSON.stringify(v)} is not RFC 3339`);
  const d = new Date(v);
  if (Number.isNaN(d.getTime())) throw new UsageError(`--at ${JSON.stringify(v)} is not a valid time`);
  return d;
}

function renderChecks(r: { checks: readonly AttestationCheck[]; accepted: boolean }): string {
  return [
    ...r.checks.map((c) => `${c.ok ? 'PASS' : 'FAIL'}  ${c.name}: ${c.detail ?? ''}`),
    r.accepted ? 'ACCEPTED' : 'REJECTED',
  ].join('\n');
}

/**
 * The ASK (or ASVK) and ARK of `product` from AMD KDS for a report signed by `signingKey`; the ARK
 * is then trusted only with the built-in key pin (amd-ark-pins.ts).
 */
async function kdsChain(product: AmdProduct, signingKey: string, kdsUrl: string): Promise<X509Certificate[]> {
  if (signingKey !== 'vcek' && signingKey !== 'vlek')
    throw new UsageError(`the report's signing key is ${signingKey}; pass --chain and --ark`);
  process.stderr.write(
    `Fetching the ${product} ${signingKey} certificate chain from ${kdsUrl} (no --chain or --ark given)\n`,
  );
  const der = await new KdsCertFetcher({ baseUrl: kdsUrl, timeoutInMs: 20_000 }).fetchCertChain(
    product,
    signingKey,
  );
  return der.map((d, i) => loadCertificate(d, `AMD KDS ${signingKey} chain #${i + 1}`));
}

/** Runs `confboot attestation verify-snp`. */
export async function run(argv: string[]): Promise<number> {
  return runCommand(async () => {
    const values = parseOptions(argv, spec);
    if (values === undefined) return 0;
    const { product, vmpl } = values;
    const at = values.at ?? new Date();
    if (values['deny-debug'] && values['allow-debug'])
      throw new UsageError('--allow-debug and --deny-debug contradict each other');

    const report = binaryOrBase64(await readInput(values.report, 'report'));
    let signingKey: string;
    try {
      signingKey = parseSnpReport(report, product).signerInfo.signingKey;
    } catch (err) {
      throw new UsageError(`report ${values.report}: ${messageOf(err)}`);
    }
    const signer = await readInput(values.signer, 'signer');
    let arkCerts: ReturnType<typeof loadCertificates>;
    let chainCerts: ReturnType<typeof loadCertificates> = [];
    try {
      loadCertificates(signer, 'signer');
      arkCerts =
        values.ark === undefined ? [] : loadCertificates(await readInput(values.ark, 'ARK'), 'ARK file');
      if (values.chain !== undefined)
        chainCerts = loadCertificates(await readInput(values.chain, 'chain'), 'chain');
      else if (values.ark === undefined) chainCerts = await kdsChain(product, signingKey, values['kds-url']);
    } catch (err) {
      if (err instanceof UsageError) throw err;
      throw new UsageError(messageOf(err));
    }
    const arkName = `ARK-${product[0]?.toUpperCase()}${product.slice(1)}`;
    const isArk = (c: (typeof chainCerts)[number]) => commonName(c.subject).startsWith('ARK-');
    const chainArk = chainCerts.find(isArk);
    const builtInPin = values.ark === undefined;
    const ark = builtInPin
      ? chainArk
      : (arkCerts.find((c) => commonName(c.subject) === arkName) ??
        (arkCerts.length === 1 ? arkCerts[0] : undefined));
    if (ark === undefined)
      throw new UsageError(
        builtInPin
          ? `no ARK: pass --ark F, or a --chain holding the ${arkName} certificate (checked against AMD's key)`
          : `--ark ${values.ark} holds no ${arkName} certificate`,
      );
    const ask =
      chainCerts.find((c) => !isArk(c)) ??
      (values.chain === undefined ? arkCerts.find((c) => !isArk(c)) : undefined);
    // Without --ark the chain's ARK is trusted only with AMD's key for the product (the built-in pin).
    const pinCheck = builtInPin
      ? keyPinCheck('ark-pin', ark, AMD_ARK_SPKI_SHA256[product], {
          key: `AMD's ${arkName} key`,
          found: `${arkName} from --chain`,
          foundFailing: 'the ARK in --chain',
        })
      : undefined;

    const policy: SnpPolicy = {
      product,
      arks: { [product]: ark },
      allowDebug: !values['deny-debug'],
      allowSmt: !values['no-smt'],
      vmpl,
    };
    if (values['minimum-tcb'] !== undefined) policy.minimumTcb = values['minimum-tcb'];
    if (values['minimum-launch-tcb'] !== undefined) policy.minimumLaunchTcb = values['minimum-launch-tcb'];
    if (values['report-data'] !== undefined) policy.reportData = values['report-data'];
    const digests = values['id-key-digest'];
    if (digests !== undefined)
      policy.idKeyDigests = { accepted: digests, enforcement: values['id-key-enforcement'] };

    const verified = verifySnpReport(
      report,
      signer,
      { ...(ask ? { ask } : {}), ...(chainArk ? { ark: chainArk } : {}) },
      policy,
      at,
    );
    const v = pinCheck
      ? { ...verified, checks: [pinCheck, ...verified.checks], accepted: verified.accepted && pinCheck.ok }
      : verified;
    const r = v.report;
    const summary = r && {
      version: r.version,
      vmpl: r.vmpl,
      policy: `0x${r.policy.raw.toString(16)}`,
      signingKey: r.signerInfo.signingKey,
      measurement: Buffer.from(r.measurement).toString('hex'),
      reportData: Buffer.from(r.reportData).toString('hex'),
      reportedTcb: {
        bl: r.reportedTcb.bl,
        tee: r.reportedTcb.tee,
        snp: r.reportedTcb.snp,
        ucode: r.reportedTcb.ucode,
      },
      chipId: Buffer.from(r.chipId).toString('hex'),
    };
    const result = {
      accepted: v.accepted,
      at: at.toISOString(),
      checks: v.checks,
      warnings: v.warnings,
      report: summary,
    };
    return printResult(values.output, 'attestation verify-snp', v.accepted ? 0 : 1, result, renderChecks);
  });
}

/** The command's option table. */
export const commandSpecs = [spec];
