// The npm packages the image carries: the production dependency closure of the project, read from
// package-lock.json (the versions the tests ran against) and copied from the clone's node_modules,
// so the build installs nothing and needs no registry.
import { existsSync } from 'node:fs';
import { cp, readFile } from 'node:fs/promises';
import { join, sep } from 'node:path';

/**
 * Peer dependencies the services never load: vitest serves only the `confboot/contract` and
 * `confboot/testing` entry points, which the image leaves out.
 */
export const TEST_ONLY_PEERS = new Set(['vitest']);

/**
 * The lockfile key (`node_modules/a/node_modules/b`) Node resolves `name` to from the package at
 * `from` ('' for the project): the nearest `node_modules/name` walking up the nesting.
 * @param {Record<string, unknown>} packages the lockfile's `packages`
 * @param {string} from
 * @param {string} name
 * @returns {string | undefined}
 */
export function resolveFrom(packages, from, name) {
  let base = from;
  for (;;) {
    const key = `${base === '' ? '' : `${base}/`}node_modules/${name}`;
    if (packages[key] !== undefined) return key;
    if (base === '') return undefined;
    const i = base.lastIndexOf('/node_modules/');
    base = i < 0 ? '' : base.slice(0, i);
  }
}

/**
 * What a lockfile entry (or package.json) needs present: name → required. Optional peers count only
 * for the project itself (`withOptionalPeers`), as `npm install --omit=dev` installs no package's
 * optional peers.
 */
function needs(entry, { withOptionalPeers = false, skip = new Set() } = {}) {
  const out = new Map();
  for (const name of Object.keys(entry.dependencies ?? {})) out.set(name, true);
  for (const name of Object.keys(entry.optionalDependencies ?? {})) out.set(name, false);
  const meta = entry.peerDependenciesMeta ?? {};
  for (const name of Object.keys(entry.peerDependencies ?? {})) {
    const optional = meta[name]?.optional === true;
    if (skip.has(name) || out.has(name) || (optional && !withOptionalPeers)) continue;
    out.set(name, !optional);
  }
  return out;
}

/**
 * Every lockfile key the project needs at run time: its dependencies, optional dependencies and
 * peer dependencies, optional ones too (the cloud SDKs and the Kubernetes client, which the services
 * load where they are used; {@link TEST_ONLY_PEERS} left out), and what those need, transitively. An optional dependency that was not
 * installed (another platform's binary) is skipped; a missing required one is an error.
 * @param {{ packages: Record<string, any> }} lock package-lock.json (lockfileVersion 2 or 3)
 * @param {Record<string, any>} manifest package.json
 * @returns {string[]} sorted lockfile keys
 */
export function productionClosure(lock, manifest) {
  const packages = lock.packages;
  if (packages === undefined)
    throw new Error('package-lock.json has no "packages" (lockfileVersion 2 or 3 needed)');
  const seen = new Set();
  const queue = [...needs(manifest, { withOptionalPeers: true, skip: TEST_ONLY_PEERS })].map(
    ([name, required]) => ({ from: '', name, required }),
  );
  while (queue.length > 0) {
    const { from, name, required } = queue.shift();
    const key = resolveFrom(packages, from, name);
    if (key === undefined) {
      if (required)
        throw new Error(`package-lock.json: ${from || 'the project'} needs ${name}, which it does not list`);
      continue;
    }
    if (seen.has(key)) continue;
    seen.add(key);
    for (const [dep, req] of needs(packages[key])) queue.push({ from: key, name: dep, required: req });
  }
  return [...seen].sort();
}

/**
 * Copies each package folder of `keys` from `repoRoot` to `appDir`, without its own nested
 * node_modules (the nested packages it needs are keys themselves) and without `.bin` links.
 * @param {string} repoRoot
 * @param {string} appDir
 * @param {readonly string[]} keys
 */
export async function copyPackages(repoRoot, appDir, keys) {
  for (const key of keys) {
    const from = join(repoRoot, key);
    if (!existsSync(join(from, 'package.json')))
      throw new Error(`${key} is not installed (run npm ci, or scripts/setup.sh)`);
    const nested = `${from}${sep}node_modules`;
    await cp(from, join(appDir, key), {
      recursive: true,
      verbatimSymlinks: true,
      filter: (src) => src !== nested && !src.startsWith(`${nested}${sep}`),
    });
  }
}

/**
 * The production closure of the project at `repoRoot`, copied into `appDir/node_modules`.
 * @returns {Promise<number>} how many packages were copied
 */
export async function installProductionModules(repoRoot, appDir) {
  const lock = JSON.parse(await readFile(join(repoRoot, 'package-lock.json'), 'utf8'));
  const manifest = JSON.parse(await readFile(join(repoRoot, 'package.json'), 'utf8'));
  const keys = productionClosure(lock, manifest);
  await copyPackages(repoRoot, appDir, keys);
  return keys.length;
}
