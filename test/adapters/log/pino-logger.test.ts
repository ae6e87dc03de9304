import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { createPinoLogger } from '../../../src/adapters/log/pino-logger.js';
import { RingLogCollector } from '../../../src/adapters/log/ring-log-collector.js';

function capture(): { stream: Writable; lines: () => Array<Record<string, unknown>> } {
  const chunks: string[] = [];
  const stream = new Writable({
    write(chunk, _enc, cb) {
      chunks.push(chunk.toString());
      cb();
    },
  });
  return {
    stream,
    lines: () =>
      chunks
        .join('')
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l)),
  };
}

describe('pino logger', () => {
  it('writes one JSON line per event with message and fields', () => {
    const out = capture();
    const log = createPinoLogger({ destination: out.stream, level: 'debug' }).child({ component: 'test' });
    log.info('Listening', { endpoint: '127.0.0.1:9000' });
    const [line] = out.lines();
    expect(line).toMatchObject({
      msg: 'Listening',
      endpoint: '127.0.0.1:9000',
      component: 'test',
      level: 30,
    });
  });

  it('redacts fields whose names are secret, as a second line of defence', () => {
    const out = capture();
    const log = createPinoLogger({ destination: out.stream });
    log.info('Oops', { token: 'abcdef.0123456789abcdef', nested: { passphrase: 'x' }, stateDiskKey: 'k' });
    const text = JSON.stringify(out.lines());
    expect(text).not.toContain('abcdef.0123456789abcdef');
    expect(text).not.toContain('"x"');
    expect(text).toContain('[redacted]');
  });
});

describe('RingLogCollector', () => {
  it('keeps the last lines of a teed logger', async () => {
    const out = capture();
    const ring = new RingLogCollector(2);
    const log = ring.tee(createPinoLogger({ destination: out.stream }));
    log.info('one');
    log.child({ step: 'disk' }).warn('two');
    log.error('three');
    const text = new TextDecoder().decode(await ring.collect());
    expect(text).not.toContain('one');
    expect(text).toContain('"msg":"two","step":"disk"');
    expect(text).toContain('three');
    expect(out.lines()).toHaveLength(3);
  });
});
