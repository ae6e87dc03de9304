/**
 * Mutual TLS between the join service (GrpcKmsClient) and the key service, for real on loopback:
 * material from createKeyServiceTls, grpc-js on both ends. Only a client whose certificate chains
 * to the key service's client CA gets a key; no certificate, another CA's certificate, a plain
 * client, or a server certificate used as a client certificate are refused.
 */
import { X509Certificate } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { credentials, Metadata, type ServiceError, status } from '@grpc/grpc-js';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { GrpcKmsClient } from '../../../src/adapters/kms/grpc-kms-client.js';
import { HkdfKms } from '../../../src/adapters/kms/hkdf-kms.js';
import {
  type KeyServiceServer,
  startKeyServiceServer,
} from '../../../src/adapters/kms/key-service-server.js';
import { createPinoLogger } from '../../../src/adapters/log/pino-logger.js';
import {
  createKeyServiceTls,
  JOIN_SERVICE_CLIENT_TLS_SECRET,
  KEY_SERVICE_TLS_SECRET,
  keyServiceDnsNames,
  renderKeyServiceTlsSecrets,
} from '../../../src/adapters/pki/key-service-tls.js';
import { run as runJoinServiceCli } from '../../../src/app/cli/join-service.js';
import { parseJoinServiceFlags } from '../../../src/app/cli/join-service-flags.js';
import { keyServiceCommand, runKeyService } from '../../../src/app/cli/key-service.js';
import { renderHelp, UsageError } from '../../../src/app/program/args.js';
import { APIClient } from '../../../src/gen/keyservice.js';
import { validateObject } from '../../deploy/k8s-schema.js';
import { useTmpDirs } from '../../support/tmp.js';

const logger = createPinoLogger({ level: 'silent' });
const kms = new HkdfKms(Buffer.alloc(32, 1), Buffer.alloc(32, 2));
const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const SERVER_NAME = 'key-service.kube-system';
const tlsMaterial = createKeyServiceTls({ serverNames: keyServiceDnsNames('kube-system') });
const otherMaterial = createKeyServiceTls({ serverNames: keyServiceDnsNames('kube-system') });

async function server(): Promise<KeyServiceServer> {
  const t = await tlsMaterial;
  const s = await startKeyServiceServer({
    kms,
    host: '127.0.0.1',
    port: 0,
    logger,
    tls: {
      certChain: Buffer.from(t.server.certPem),
      privateKey: Buffer.from(t.server.keyPem),
      clientCa: Buffer.from(t.caPem),
    },
  });
  cleanups.push(() => s.shutdown());
  return s;
}

function client(port: number, tls?: ConstructorParameters<typeof GrpcKmsClient>[0]['tls']): GrpcKmsClient {
  const c = new GrpcKmsClient({
    endpoint: `127.0.0.1:${port}`,
    defaultTimeoutInMs: 5_000,
    ...(tls ? { tls: { serverName: SERVER_NAME, ...tls } } : {}),
  });
  cleanups.push(() => c.close());
  return c;
}

const pem = (s: string) => Buffer.from(s);

describe('key service mutual TLS (real TLS on loopback)', () => {
  it('gives a key to the join service certificate, the same key as the KMS derives', async () => {
    const t = await tlsMaterial;
    const { port } = await server();
    const c = client(port, {
      ca: pem(t.caPem),
      certChain: pem(t.client.certPem),
      privateKey: pem(t.client.keyPem),
    });
    expect(Buffer.from(await c.getDataKey('disk-1', 32))).toEqual(
      Buffer.from(await kms.getDataKey('disk-1', 32)),
    );
  });

  it('refuses a client without a certificate, with another CA, a plain client, and a server certificate as client', async () => {
    const t = await tlsMaterial;
    const o = await otherMaterial;
    const { port } = await server();
    const attempts: Array<[string, GrpcKmsClient]> = [
      [
        'another CA',
        client(port, {
          ca: pem(t.caPem),
          certChain: pem(o.client.certPem),
          privateKey: pem(o.client.keyPem),
        }),
      ],
      ['plain gRPC', client(port)],
      [
        'server certificate',
        client(port, {
          ca: pem(t.caPem),
          certChain: pem(t.server.certPem),
          privateKey: pem(t.server.keyPem),
        }),
      ],
    ];
    for (const [name, c] of attempts)
      await expect(c.getDataKey('disk-1', 32), name).rejects.toMatchObject({ code: 'unavailable' });
    // A TLS client that trusts the key service but presents no certificate at all.
    const bare = new APIClient(`127.0.0.1:${port}`, credentials.createSsl(pem(t.caPem)), {
      'grpc.ssl_target_name_override': SERVER_NAME,
    });
    cleanups.push(() => bare.close());
    const err = await new Promise<ServiceError | null>((resolve) =>
      bare.getDataKey(
        { dataKeyId: 'disk-1', length: 32 },
        new Metadata(),
        { deadline: Date.now() + 5_000 },
        (e) => resolve(e),
      ),
    );
    expect(err?.code).toBe(status.UNAVAILABLE);
  });

  it('the client refuses a key service whose certificate another CA issued', async () => {
    const t = await tlsMaterial;
    const o = await otherMaterial;
    const { port } = await server();
    const c = client(port, {
      ca: pem(o.caPem),
      certChain: pem(t.client.certPem),
      privateKey: pem(t.client.keyPem),
    });
    await expect(c.getDataKey('disk-1', 32)).rejects.toMatchObject({ code: 'unavailable' });
  });
});

describe('createKeyServiceTls', () => {
  it('issues a CA, a server certificate for the cluster names and a client certificate, with purposes', async () => {
    const t = await createKeyServiceTls({ serverNames: keyServiceDnsNames('kube-system'), validityDays: 30 });
    const ca = new X509Certificate(t.caPem);
    const server = new X509Certificate(t.server.certPem);
    const cl = new X509Certificate(t.client.certPem);
    expect(ca.ca).toBe(true);
    expect(server.checkIssued(ca) && server.verify(ca.publicKey)).toBe(true);
    expect(cl.checkIssued(ca) && cl.verify(ca.publicKey)).toBe(true);
    expect(server.ca || cl.ca).toBe(false);
    expect(server.subjectAltName).toContain('DNS:key-service.kube-system.svc.cluster.local');
    expect(server.checkHost('key-service.kube-system')).toBe('key-service.kube-system');
    expect(server.keyUsage).toEqual(['1.3.6.1.5.5.7.3.1']);
    expect(cl.keyUsage).toEqual(['1.3.6.1.5.5.7.3.2']);
    const days = (Date.parse(server.validTo) - Date.now()) / 86_400_000;
    expect(days).toBeGreaterThan(29);
    expect(days).toBeLessThan(31);
  });

  it('renders two valid Secrets holding the right halves', async () => {
    const t = await tlsMaterial;
    const docs = parseAllDocuments(renderKeyServiceTlsSecrets(t, 'kube-system')).map((d) => d.toJS());
    expect(docs.map((d) => d.metadata.name)).toEqual([
      KEY_SERVICE_TLS_SECRET,
      JOIN_SERVICE_CLIENT_TLS_SECRET,
    ]);
    for (const d of docs) expect(await validateObject(d)).toEqual([]);
    expect(docs[0].stringData).toEqual({
      'tls.crt': t.server.certPem,
      'tls.key': t.server.keyPem,
      'ca.crt': t.caPem,
    });
    expect(docs[1].stringData).toEqual({
      'tls.crt': t.client.certPem,
      'tls.key': t.client.keyPem,
      'ca.crt': t.caPem,
    });
  });
});

describe('confboot key-service and join-service mutual-TLS flags', () => {
  const tmp = useTmpDirs('confboot-key-service-tls-');

  async function files() {
    const t = await tlsMaterial;
    const dir = tmp();
    const write = (name: string, text: string | Buffer) => {
      const path = join(dir, name);
      writeFileSync(path, text, { mode: 0o600 });
      return path;
    };
    return {
      t,
      secret: write('mastersecret', Buffer.alloc(32, 1)),
      salt: write('salt', Buffer.alloc(32, 2)),
      cert: write('tls.crt', t.server.certPem),
      key: write('tls.key', t.server.keyPem),
      ca: write('ca.crt', t.caPem),
      clientCert: write('client.crt', t.client.certPem),
      clientKey: write('client.key', t.client.keyPem),
      notPem: write('not.pem', 'hello'),
    };
  }

  it('key-service --tls-cert/--tls-key/--client-ca serves mutual TLS only, and logs it', async () => {
    const f = await files();
    const lines: string[] = [];
    const stream = new PassThrough();
    stream.on('data', (c: Buffer) => lines.push(...c.toString('utf8').split('\n').filter(Boolean)));
    const stop = new AbortController();
    cleanups.push(() => stop.abort());
    let listening: (p: number) => void = () => {};
    const bound = new Promise<number>((ok) => (listening = ok));
    const argv = ['--master-secret-file', f.secret, '--salt-file', f.salt, '--listen', '127.0.0.1:0'];
    const exit = runKeyService([...argv, '--tls-cert', f.cert, '--tls-key', f.key, '--client-ca', f.ca], {
      signal: stop.signal,
      logger: createPinoLogger({ destination: stream, level: 'debug' }),
      onListening: ({ port }) => listening(port),
    });
    const port = await Promise.race([bound, exit.then((c) => Promise.reject(new Error(`exited ${c}`)))]);
    const ok = client(port, {
      ca: pem(f.t.caPem),
      certChain: pem(f.t.client.certPem),
      privateKey: pem(f.t.client.keyPem),
    });
    expect(await ok.getDataKey('disk-1', 32)).toHaveLength(32);
    await expect(client(port).getDataKey('disk-1', 32)).rejects.toMatchObject({ code: 'unavailable' });
    stop.abort();
    expect(await exit).toBe(0);
    expect(lines.map((l) => JSON.parse(l))).toContainEqual(
      expect.objectContaining({ msg: 'Key service listening', mutualTls: true }),
    );
    expect(lines.join('\n')).not.toContain(f.t.server.keyPem.split('\n')[1]);
  });

  it('key-service refuses a partial or unreadable TLS configuration with a usage error', async () => {
    const f = await files();
    const signal = new AbortController().signal;
    const argv = ['--master-secret-file', f.secret, '--salt-file', f.salt, '--listen', '127.0.0.1:0'];
    await expect(runKeyService([...argv, '--tls-cert', f.cert], { signal })).rejects.toThrow(
      /needs all of --tls-cert, --tls-key, --client-ca; missing --tls-key, --client-ca/,
    );
    await expect(
      runKeyService([...argv, '--tls-cert', f.cert, '--tls-key', f.key, '--client-ca', f.notPem], { signal }),
    ).rejects.toThrow(UsageError);
    await expect(
      runKeyService([...argv, '--tls-cert', f.cert, '--tls-key', f.key, '--client-ca', `${f.ca}.missing`], {
        signal,
      }),
    ).rejects.toThrow(/--client-ca: reading .*ENOENT/);
  });

  it('key-service --help says what the plain port exposes', () => {
    const help = renderHelp(keyServiceCommand);
    expect(help).toMatch(/no authentication/);
    expect(help).toMatch(/measurement secret/);
    expect(help).toMatch(/every node's state disk/);
    expect(help).toMatch(/--client-ca F/);
  });

  it('join-service takes --key-service-ca/-cert/-key together or not at all', async () => {
    const f = await files();
    const base = [
      '--csp=qemu',
      '--attestation-variant=qemu-vtpm',
      '--attestation-config=/x',
      '--measurement-salt-file=/y',
      '--key-service-endpoint=key-service.kube-system:9000',
    ];
    expect(parseJoinServiceFlags(base)?.keyService).toMatchObject({
      ca: undefined,
      cert: undefined,
      key: undefined,
    });
    const tls = [
      `--key-service-ca=${f.ca}`,
      `--key-service-cert=${f.clientCert}`,
      `--key-service-key=${f.clientKey}`,
    ];
    expect(parseJoinServiceFlags([...base, ...tls])?.keyService).toMatchObject({
      ca: f.ca,
      cert: f.clientCert,
      key: f.clientKey,
    });
    expect(() => parseJoinServiceFlags([...base, `--key-service-ca=${f.ca}`])).toThrow(
      /missing --key-service-cert, --key-service-key/,
    );
    // An unreadable file is a usage error (exit 2) before anything starts.
    const stderr = vi.spyOn(process.stderr, 'write').mockImplementation(() => true);
    cleanups.push(() => stderr.mockRestore());
    expect(await runJoinServiceCli([...base, ...tls.slice(0, 2), `--key-service-key=${f.notPem}`])).toBe(2);
    expect(stderr.mock.calls.map((c) => String(c[0])).join('')).toMatch(/--key-service-key: .* holds no PEM/);
  });
});
