/**
 * src/app holds composition only: no file in it serves a socket (node:http, node:https, node:http2,
 * node:net, node:tls, node:dgram, or a @grpc/grpc-js server) and none parses X.509 (a value import
 * of node:crypto's X509Certificate, `new X509Certificate(`, or an ASN.1/X.509 library). Servers,
 * codecs and certificate parsing live in src/adapters; app only wires them. Type-only imports are
 * allowed: naming a type is not code that runs.
 */
import { readFileSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { filesUnder } from './imports.js';

const root = resolve(import.meta.dirname, '../..');
const app = join(root, 'src/app');

/** Modules whose value import means socket-serving code. */
const SERVER_MODULES = [
  'node:http',
  'node:https',
  'node:http2',
  'node:net',
  'node:tls',
  'node:dgram',
  '@grpc/grpc-js',
];
/** Modules whose value import means X.509 / ASN.1 parsing. */
const X509_MODULES = ['@peculiar/x509', 'pkijs', 'asn1js', '@peculiar/asn1-schema', '@peculiar/asn1-x509'];

/** Value imports (static non-type, dynamic, side-effect) of `code`, with the names they bind. */
function valueImports(code: string): { spec: string; names: string }[] {
  const found: { spec: string; names: string }[] = [];
  const stat = /(?:^|\n)\s*import\s+(type\s+)?([^'";]*?)\s*from\s+['"]([^'"]+)['"]/g;
  for (const m of code.matchAll(stat)) {
    if (m[1] !== undefined) continue;
    // Drop `type X` members of a mixed import: they bind no runtime value.
    const names = (m[2] ?? '').replace(/\btype\s+\w+(\s+as\s+\w+)?\s*,?/g, '');
    if (!/\w/.test(names.replace(/[{}\s,]/g, ''))) continue;
    found.push({ spec: m[3] as string, names });
  }
  for (const m of code.matchAll(/import\(\s*['"]([^'"]+)['"]\s*\)/g))
    found.push({ spec: m[1] as string, names: '*' });
  for (const m of code.matchAll(/(?:^|\n)\s*import\s+['"]([^'"]+)['"]/g))
    found.push({ spec: m[1] as string, names: '' });
  return found;
}

/** Why `code` is not composition, or an empty list. */
function problemsOf(code: string): string[] {
  const problems: string[] = [];
  for (const { spec, names } of valueImports(code)) {
    if (SERVER_MODULES.includes(spec)) problems.push(`imports ${spec} (server code belongs in src/adapters)`);
    if (X509_MODULES.includes(spec)) problems.push(`imports ${spec} (X.509 parsing belongs in src/adapters)`);
    if (spec === 'node:crypto' && (/\bX509Certificate\b/.test(names) || names === '*'))
      problems.push('imports X509Certificate from node:crypto (X.509 parsing belongs in src/adapters)');
  }
  if (/\bnew\s+X509Certificate\s*\(/.test(code)) problems.push('parses X.509 (new X509Certificate)');
  return problems;
}

describe('src/app holds composition only', () => {
  const files = filesUnder(app);

  it('finds the app tree', () => {
    expect(files.length).toBeGreaterThan(20);
  });

  it('no file in src/app serves a socket or parses X.509', () => {
    const problems = files.flatMap((f) =>
      problemsOf(readFileSync(f, 'utf8')).map((p) => `${relative(root, f)}: ${p}`),
    );
    expect(problems).toEqual([]);
  });

  // The check must catch what it forbids, or the test above proves nothing.
  it.each([
    ["import { createServer } from 'node:http';", 1],
    ["import * as net from 'node:net';", 1],
    ["const { createServer } = await import('node:net');", 1],
    ["import { Server, ServerCredentials } from '@grpc/grpc-js';", 1],
    ["import { X509Certificate } from 'node:crypto';\nnew X509Certificate(der);", 2],
    ["import { createHash, X509Certificate } from 'node:crypto';", 1],
    ["import * as x509 from '@peculiar/x509';", 1],
    ['const c = new X509Certificate(pem);', 1],
    ["import type { X509Certificate } from 'node:crypto';", 0],
    ["import { createHash, type X509Certificate } from 'node:crypto';", 0],
    ["import type { Server } from 'node:http';", 0],
    ["import { createHash } from 'node:crypto';", 0],
    ["import { startGrpcHealthServer } from '../../adapters/ops/grpc-health.js';", 0],
  ])('%j has %i problem(s)', (code, count) => {
    expect(problemsOf(code)).toHaveLength(count);
  });

  it('flags a violation planted in a copy of a real app file', () => {
    const real = readFileSync(join(app, 'join-service/service.ts'), 'utf8');
    expect(problemsOf(real)).toEqual([]);
    const planted = `import { Server } from '@grpc/grpc-js';\n${real}`;
    expect(problemsOf(planted)).toEqual(['imports @grpc/grpc-js (server code belongs in src/adapters)']);
  });
});
