/**
 * How the host and the in-VM agent talk: the host passes a JSON config as the QEMU fw_cfg file
 * `opt/confboot/config` (not secret: which step to run, nonces, addresses); the agent answers on the
 * VM's second serial port in lines `CONFBOOT-MINI <json>`, which QEMU writes to a file on the host.
 */

/** Where QEMU's `-fw_cfg name=opt/confboot/config` appears in the guest (qemu_fw_cfg module). */
export const GUEST_CONFIG_PATH = '/sys/firmware/qemu_fw_cfg/by_name/opt/confboot/config/raw';
/** The fw_cfg name of the config. */
export const GUEST_CONFIG_FW_CFG = 'opt/confboot/config';
/** The report channel: the VM's second serial port. */
export const REPORT_PORT = '/dev/ttyS1';
/** Prefix of every report line. */
export const REPORT_PREFIX = 'CONFBOOT-MINI ';

/** The orders the host gives the agent. */
export interface GuestConfig {
  step: 'attest';
  /** Hex nonce the attestation binds (with userData). */
  nonce: string;
  /** Hex userData, default 32 zero bytes. */
  userData?: string;
  /** The metadata server's root URL; when set the agent also reports what `/self` says. */
  metadataUrl?: string;
  /** The state disk to format (first boot), validate and map with dm-crypt, e.g. /dev/vda. */
  stateDisk?: string;
}
