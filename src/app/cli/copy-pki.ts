/**
 * `confboot copy-pki`: the join service's init container. kubeadm's pki files are root-only (0600)
 * on the host, and Kubernetes applies fsGroup and defaultMode only to volumes it writes, never to
 * hostPath files. So a root init container copies exactly the control-plane files the join service
 * reads (CONTROL_PLANE_FILE_NAMES: the cluster CA, the front-proxy CA, the etcd CA and the service
 * account keys) into a memory-backed volume, owned by the service's user and readable by it only;
 * nothing else of /etc/kubernetes reaches the pod. Written in the CLI so the image needs no shell or
 * coreutils for it. It needs only CHOWN and FOWNER. The contents are never printed.
 */
import { copyOwned } from '../../adapters/fs/owned-copy.js';
import { CONTROL_PLANE_FILE_NAMES } from '../../ports/kubernetes-node.js';
import { EXIT, runCommand, UsageError } from '../program/args.js';
import { defineCommand, parseOptions } from '../program/options.js';
import { printResult } from '../program/output.js';
import { OUTPUT_OPTION } from '../program/shared-options.js';

/** The uid and gid the images run their services as. */
const SERVICE_ID = 65532;

/** `UID:GID`, each a whole number. */
function owner(raw: string, flag: string): { uid: number; gid: number } {
  const m = /^(\d{1,10}):(\d{1,10})$/.exec(raw);
  if (!m) throw new UsageError(`--${flag} must be UID:GID (numbers), got ${JSON.stringify(raw)}`);
  return { uid: Number(m[1]), gid: Number(m[2]) };
}

/** Octal permission bits such as 0400. */
function octalMode(raw: string, flag: string): number {
  if (!/^0?[0-7]{3}$/.test(raw))
    throw new UsageError(`--${flag} must be octal permission bits like 0400, got ${raw}`);
  return Number.parseInt(raw, 8);
}

/** Flags of `confboot copy-pki`. */
export const copyPkiCommand = defineCommand({
  name: 'copy-pki',
  summary:
    "Copy the control-plane pki files the join service reads from kubeadm's directory into one its user owns (the join service's init container).",
  options: {
    from: {
      type: 'string',
      valueName: 'DIR',
      required: true,
      description: "kubeadm's pki directory (as mounted)",
    },
    to: {
      type: 'string',
      valueName: 'DIR',
      required: true,
      description: 'directory the join service reads them from',
    },
    owner: {
      type: 'string',
      valueName: 'UID:GID',
      default: `${SERVICE_ID}:${SERVICE_ID}`,
      description: 'owner of the copies',
      parse: owner,
    },
    mode: {
      type: 'string',
      valueName: 'OCTAL',
      default: '0400',
      description: 'mode of the copies',
      parse: octalMode,
    },
    output: OUTPUT_OPTION,
  },
  epilog: `Copies: ${CONTROL_PLANE_FILE_NAMES.join(', ')}. Every file is read before any is written; a missing one\nfails the copy and writes nothing. Each copy appears under its name only once complete.`,
  exitCodes: { 0: 'every file copied', 1: 'a file could not be read or written', 2: 'bad flags' },
});

/** Runs `confboot copy-pki`. */
export function run(argv: string[]): Promise<number> {
  return runCommand(async () => {
    const v = parseOptions(argv, copyPkiCommand);
    if (v === undefined) return EXIT.ok;
    const files = await copyOwned({
      from: v.from,
      to: v.to,
      files: CONTROL_PLANE_FILE_NAMES,
      ...v.owner,
      mode: v.mode,
    });
    const result = {
      to: v.to,
      files,
      owner: `${v.owner.uid}:${v.owner.gid}`,
      mode: `0${v.mode.toString(8)}`,
    };
    return printResult(
      v.output,
      'copy-pki',
      EXIT.ok,
      result,
      (r) => `copied ${r.files.length} files to ${r.to} (owner ${r.owner}, mode ${r.mode})`,
    );
  });
}

/** The command's option table. */
export const commandSpecs = [copyPkiCommand];
