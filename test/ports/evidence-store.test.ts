/**
 * The keys of ticket evidence records: an issued ticket's record is `disk/<uuid>`, a refused
 * request's `refused-disk/<uuid>`, both with the UUID in lower case, so a refused request naming
 * another node's disk never lands on the record of that disk's issued ticket.
 */
import { describe, expect, it } from 'vitest';
import { ticketEvidenceKey } from '../../src/ports/evidence-store.js';

describe('ticketEvidenceKey', () => {
  const uuid = '9C1D5CB2-3F5E-4A8A-B6C9-0E0A6F1D2C3B';

  it('keys an issued ticket by its lower-case disk UUID', () => {
    expect(ticketEvidenceKey(uuid, 'issued')).toBe('disk/9c1d5cb2-3f5e-4a8a-b6c9-0e0a6f1d2c3b');
  });

  it('keys a refused request apart from the issued record of the same disk', () => {
    expect(ticketEvidenceKey(uuid, 'refused')).toBe('refused-disk/9c1d5cb2-3f5e-4a8a-b6c9-0e0a6f1d2c3b');
    expect(ticketEvidenceKey(uuid, 'refused')).not.toBe(ticketEvidenceKey(uuid, 'issued'));
    expect(ticketEvidenceKey(uuid.toLowerCase(), 'issued')).toBe(ticketEvidenceKey(uuid, 'issued'));
  });
});
