#!/bin/bash
# The host around cryptsetup for test/testbed/mini/disk-mapper.test.ts.
# Usage: cryptsetup-host.sh LOG DONE TRIGGER ATTACK_SCRIPT -- cryptsetup arguments…
# Logs every argv to LOG; the first time the subcommand is TRIGGER it runs ATTACK_SCRIPT and logs
# ATTACK first. No device-mapper exists where the tests run, so the dm-crypt mapping is SUBSTITUTED:
# `open` without --test-passphrase runs the same unlock as `open --test-passphrase` (same arguments
# minus the mapping name) and logs "MAPPED <UUID of the header that unlock read>"; `status NAME`
# answers as an active aes-xts-plain64 mapping.
log=$1 done=$2 trigger=$3 attack=$4
shift 5
if [ "$1" = "$trigger" ] && [ ! -e "$done" ]; then
  touch "$done"
  sh "$attack"
  echo ATTACK >> "$log"
fi
printf '%s\n' "$*" >> "$log"
if [ "$1" = status ]; then
  printf '/dev/mapper/%s is active.\n  cipher:  aes-xts-plain64\n' "$2"
  exit 0
fi
if [ "$1" = open ] && [[ " $* " != *" --test-passphrase "* ]]; then
  args=("${@:2:$#-2}")
  hdr=""
  for ((i = 0; i < ${#args[@]}; i++)); do
    if [ "${args[$i]}" = --header ]; then hdr="${args[$((i + 1))]}"; fi
  done
  dev="${args[${#args[@]}-1]}"
  cryptsetup open --test-passphrase "${args[@]}" || exit $?
  echo "MAPPED $(cryptsetup luksUUID ${hdr:+--header "$hdr"} "$dev")" >> "$log"
  exit 0
fi
exec cryptsetup "$@"
