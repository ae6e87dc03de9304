// The OCI side of the image build, with Debian's umoci (no container engine, no base image): an empty
// image whose bundle is unpacked rootless, one layer per repack of the bundle's root filesystem, the
// image config, and the OCI layout written out as one tar archive (an "oci-archive").
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { run } from './run.mjs';

/** RFC 3339 UTC time of a Unix time in seconds, as OCI configs and history entries carry it. */
export function rfc3339(epoch) {
  return new Date(epoch * 1000).toISOString().replace(/\.\d{3}Z$/, 'Z');
}

/**
 * An empty image `layout:tag` and its bundle unpacked rootless at `bundle` (bundle/rootfs is where the
 * layers are staged).
 */
export async function newImage(layout, tag, bundle) {
  await run('umoci', ['init', '--layout', layout]);
  await run('umoci', ['new', '--image', `${layout}:${tag}`]);
  await run('umoci', ['unpack', '--rootless', '--image', `${layout}:${tag}`, bundle]);
}

/**
 * One layer holding what changed in `bundle/rootfs` since the last unpack or repack; the bundle is
 * refreshed so the next layer holds only what is staged after this one.
 */
export async function addLayer(layout, tag, bundle, { epoch, createdBy }) {
  await run(
    'umoci',
    [
      'repack',
      '--refresh-bundle',
      '--image',
      `${layout}:${tag}`,
      '--history.created',
      rfc3339(epoch),
      '--history.created_by',
      createdBy,
      bundle,
    ],
    { timeoutMs: 900_000 },
  );
}

/**
 * Sets the image config: user, entrypoint, default arguments, working folder, environment and
 * labels, with `epoch` as its creation time.
 * @param {{ user: string, entrypoint: string[], cmd: string[], workingDir: string, env: string[], labels: Record<string, string> }} config
 */
export async function configure(layout, tag, epoch, config) {
  const args = ['config', '--image', `${layout}:${tag}`, '--os', 'linux', '--architecture', 'amd64'];
  args.push('--created', rfc3339(epoch), '--history.created', rfc3339(epoch));
  args.push('--history.created_by', 'npm run image: config');
  args.push('--config.user', config.user, '--config.workingdir', config.workingDir);
  for (const e of config.entrypoint) args.push('--config.entrypoint', e);
  for (const c of config.cmd) args.push('--config.cmd', c);
  for (const e of config.env) args.push('--config.env', e);
  for (const [k, v] of Object.entries(config.labels).sort()) args.push('--config.label', `${k}=${v}`);
  await run('umoci', args);
  await run('umoci', ['gc', '--layout', layout]);
}

/** The manifest digest of `tag` in the OCI layout (what `image@sha256:…` names). */
export async function manifestDigest(layout, tag) {
  const index = JSON.parse(await readFile(join(layout, 'index.json'), 'utf8'));
  const entry = index.manifests.find((m) => m.annotations?.['org.opencontainers.image.ref.name'] === tag);
  if (entry === undefined) throw new Error(`${layout}/index.json: no manifest tagged ${tag}`);
  return entry.digest;
}

/**
 * Writes the OCI layout as an uncompressed tar (the layers inside are gzip already): entries sorted,
 * owned by 0:0, one mtime, ustar headers (no access or change times), so equal layouts give equal
 * archives.
 */
export async function writeArchive(layout, archive, epoch) {
  await run('tar', [
    '--create',
    '--file',
    archive,
    '--directory',
    layout,
    '--sort=name',
    '--format=ustar',
    `--mtime=@${epoch}`,
    '--owner=0',
    '--group=0',
    '--numeric-owner',
    '--mode=u=rwX,go=rX',
    'oci-layout',
    'index.json',
    'blobs',
  ]);
}
