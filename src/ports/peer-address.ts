/**
 * Network addresses as Node, grpc-js and the command line write them: `host:port`, with IPv6 hosts
 * in brackets (`[fd00::1]:9000`); remote addresses may also come as a bare `v6:port`. Shared by the
 * domain (who is calling), the gRPC edge and the limits (per-source accounting) and the CLI flags,
 * with the one canonical spelling of an IP address ({@link canonicalIp}) that the ticket issuer and
 * the metadata peer identity compare addresses in.
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

/**
 * The IP address of a caller address `ip:port` (`[v6]:port` or `v6:port`, as Node reports remote
 * addresses); an IPv4-mapped IPv6 address gives the IPv4 address. Undefined if it holds no IP.
 */
export function callerIp(peer: string): string | undefined {
  return canonicalIp(peerHost(peer));
}

/**
 * The canonical text of an IP address, for comparing addresses written differently: IPv4 dotted
 * quad (also for IPv4-mapped IPv6), IPv6 as eight lower-case hex groups. Undefined if not an IP.
 */
export function canonicalIp(ip: string): string | undefined {
  const v4 = parseIpv4(ip);
  if (v4 !== undefined) return v4.join('.');
  const v6 = parseIpv6(ip);
  if (v6 === undefined) return undefined;
  const mapped = v6.slice(0, 5).every((g) => g === 0) && v6[5] === 0xffff;
  if (mapped) {
    const [hi, lo] = [v6[6] as number, v6[7] as number];
    return [hi >> 8, hi & 0xff, lo >> 8, lo & 0xff].join('.');
  }
  return v6.map((g) => g.toString(16)).join(':');
}

/** Bits of an IPv6 address that per-source limits group by: a host is commonly given a whole /64. */
export const IPV6_SOURCE_PREFIX_BITS = 64;

/**
 * The key per-source limits (unattested connection caps, rate limits) count an address under: an
 * IPv4 address (also IPv4-mapped IPv6) as itself, an IPv6 address as its /64 prefix
 * (`2001:db8:0:1::/64`), because one host commonly holds a whole /64 and could otherwise open each
 * connection from a new "source"; anything that is not an IP (e.g. a Unix socket path) unchanged.
 */
export function sourceKey(address: string): string {
  const ip = canonicalIp(address);
  if (ip === undefined) return address;
  if (!ip.includes(':')) return ip;
  const groups = ip.split(':').slice(0, IPV6_SOURCE_PREFIX_BITS / 16);
  return `${groups.join(':')}::/${IPV6_SOURCE_PREFIX_BITS}`;
}

function parseIpv4(s: string): number[] | undefined {
  const parts = s.split('.');
  if (parts.length !== 4) return undefined;
  const bytes = parts.map((p) => (/^(0|[1-9]\d{0,2})$/.test(p) ? Number(p) : 256));
  return bytes.every((b) => b <= 255) ? bytes : undefined;
}

function parseIpv6(s: string): number[] | undefined {
  const halves = s.toLowerCase().split('::');
  if (halves.length > 2) return undefined;
  const groups = (h: string): number[] | undefined => {
    if (h === '') return [];
    const out: number[] = [];
    const parts = h.split(':');
    for (const [i, p] of parts.entries()) {
      if (i === parts.length - 1 && p.includes('.')) {
        const v4 = parseIpv4(p);
        if (v4 === undefined) return undefined;
        out.push(((v4[0] as number) << 8) | (v4[1] as number), ((v4[2] as number) << 8) | (v4[3] as number));
      } else if (/^[0-9a-f]{1,4}$/.test(p)) out.push(Number.parseInt(p, 16));
      else return undefined;
    }
    return out;
  };
  const head = groups(halves[0] as string);
  const tail = halves.length === 2 ? groups(halves[1] as string) : [];
  if (head === undefined || tail === undefined) return undefined;
  if (halves.length === 1) return head.length === 8 ? head : undefined;
  const fill = 8 - head.length - tail.length;
  return fill >= 1 ? [...head, ...new Array<number>(fill).fill(0), ...tail] : undefined;
}
