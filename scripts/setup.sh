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
if [ ${#need[@]} -gt 0 ]; then
  echo "setup: installing system packages: ${need[*]}"
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}"
else
  echo "setup: system packages present"
fi

echo "setup: installing npm packages (npm ci: the lockfile is used as committed, never rewritten)"
npm ci --no-audit --no-fund --loglevel=error
echo "setup: building"
npm run build --silent
echo "setup: done"
