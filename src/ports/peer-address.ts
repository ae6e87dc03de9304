/**
 * Network addresses as Node, grpc-js and the command line write them: `host:port`, with IPv6 hosts
 * in brackets (`[fd00::1]:9000`); remote addresses may also come as a bare `v6:port`. Shared by the
 * domain (who is calling), the gRPC edge and the limits (per-source accounting) and the CLI flags.
 */

/**
 * The host part of a peer address `ip:port`, `[v6]:port` or `v6:port` (without brackets). A string
 * without a numeric port is returned unchanged (e.g. a Unix socket path).
 */
export function peerHost(peer: string): string {
  const bracketed = /^\[([^\]]+)\]:\d+$/.exec(peer);
  if (bracketed) return bracketed[1] as string;
  const i = peer.lastIndexOf(':');
  if (i <= 0 || !/^\d+$/.test(peer.slice(i + 1))) return peer;
  return peer.slice(0, i);
}

/** `host:port`, with brackets around an IPv6 host. */
export function joinHostPort(host: string, port: number | string): string {
  return host.includes(':') && !host.startsWith('[') ? `[${host}]:${port}` : `${host}:${port}`;
}

/**
 * Splits a strict `HOST:PORT` (IPv6 hosts in brackets, port 0–65535), e.g. a `--listen` flag.
 * Undefined when `value` is not of that form.
 */
export function splitHostPort(value: string): { host: string; port: number } | undefined {
  const m = /^(?:\[([^\]]+)\]|([^:]+)):(\d{1,5})$/.exec(value);
  const port = m ? Number(m[3]) : Number.NaN;
  if (!m || port > 65535) return undefined;
  return { host: (m[1] ?? m[2]) as string, port };
}
