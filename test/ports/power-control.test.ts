/**
 * The PowerControl port: its DI token is the registry symbol of its name (one token, whichever copy
 * of the package binds or resolves it), and the command adapter satisfies it.
 */
import { describe, expect, it } from 'vitest';
import { CommandPowerControl } from '../../src/adapters/system/command-power-control.js';
import { PowerControl } from '../../src/ports/power-control.js';

describe('PowerControl', () => {
  it('is the registry symbol confboot.PowerControl', () => {
    expect(PowerControl).toBe(Symbol.for('confboot.PowerControl'));
  });

  it('is implemented by the command adapter', () => {
    const power: PowerControl = new CommandPowerControl(['true']);
    expect(typeof power.reboot).toBe('function');
  });
});
