/**
 * The defaults the CLI, the demo and the manifests share: the V8 flags the join service's container
 * starts Node with are ones this Node accepts (a real `node` run with them), the service paths sit
 * under upstream's /var/config, and the ports a node serves on differ from each other.
 */
import { execFileSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import {
  ATTESTATION_CONFIG_PATH,
  BOOTSTRAPPER_PORT,
  DENY_LIST_PATH,
  JOIN_SERVICE_HTTP_PORT,
  JOIN_SERVICE_PORT,
  JOIN_SERVICE_V8_FLAGS,
  KUBERNETES_PORT,
  MASTER_SECRET_PATH,
  MEASUREMENT_SALT_PATH,
  METADATA_SERVER_PORT,
  SALT_PATH,
  SERVICE_BASE_PATH,
} from '../../src/app/defaults.js';

describe('defaults', () => {
  it('gives the join service V8 flags that Node accepts', () => {
    const out = execFileSync(
      process.execPath,
      [...JOIN_SERVICE_V8_FLAGS, '-e', 'process.stdout.write("ok")'],
      {
        encoding: 'utf8',
      },
    );
    expect(out).toBe('ok');
    expect(() =>
      execFileSync(process.execPath, ['--no-such-v8-flag-confboot', '-e', '0'], { stdio: 'pipe' }),
    ).toThrow();
  });

  it("puts the service files under upstream's /var/config", () => {
    expect(SERVICE_BASE_PATH).toBe('/var/config');
    for (const p of [
      ATTESTATION_CONFIG_PATH,
      MEASUREMENT_SALT_PATH,
      MASTER_SECRET_PATH,
      SALT_PATH,
      DENY_LIST_PATH,
    ])
      expect(p.startsWith(`${SERVICE_BASE_PATH}/`)).toBe(true);
    expect(
      new Set([ATTESTATION_CONFIG_PATH, MEASUREMENT_SALT_PATH, MASTER_SECRET_PATH, SALT_PATH]).size,
    ).toBe(4);
  });

  it("uses upstream's ports, distinct where they share a host", () => {
    expect([JOIN_SERVICE_PORT, KUBERNETES_PORT]).toEqual([30090, 6443]);
    const onNode = [
      BOOTSTRAPPER_PORT,
      JOIN_SERVICE_PORT,
      JOIN_SERVICE_HTTP_PORT,
      KUBERNETES_PORT,
      METADATA_SERVER_PORT,
    ];
    expect(new Set(onNode).size).toBe(onNode.length);
  });
});
