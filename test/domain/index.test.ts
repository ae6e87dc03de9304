/** The domain barrel exports what src/app wires (a missing re-export would break the lead's wiring). */
import { describe, expect, it } from 'vitest';
import * as domain from '../../src/domain/index.js';

describe('src/domain/index.ts', () => {
  it.each([
    'NodeLock',
    'JoinFlow',
    'InitFlow',
    'TicketIssuer',
    'MeasurementsPolicy',
    'InitFailure',
    'isInitFailure',
    'deriveDataKey',
    'deriveClusterId',
    'parseMeasurements',
    'parseAttestationConfig',
    'compareMeasurements',
    'formatMismatch',
    'fullJitterDelayMs',
    'callWithTimeout',
  ])('exports %s', (name) => {
    expect(typeof (domain as Record<string, unknown>)[name]).toBe('function');
  });
});
