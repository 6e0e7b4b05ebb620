import { describe, expect, it } from 'vitest';
import { closestClientCommand } from '../../../client/cli/commands.ts';
import { closest } from '../../../client/cli/suggest.ts';

describe('did you mean, for the client commands', () => {
  it('names the closest word for a typo, a swap of neighbours or a missing letter', () => {
    expect(closest('remvoe', ['remove'])).toBe('remove');
    expect(closest('auht', ['auth', 'relay', 'token'])).toBe('auth');
    expect(closest('ad', ['add', 'remove'])).toBe('add');
    expect(closest('DEVICE-NAME', ['device-name', 'platform'])).toBe('device-name');
  });

  it('names nothing when no word is close', () => {
    expect(closest('zzzzzz', ['auth', 'relay', 'token'])).toBeUndefined();
    expect(closest('x', ['add'])).toBeUndefined();
  });

  it('finds the client subcommand meant by a mistyped first word', () => {
    expect(closestClientCommand('logn')).toBe('login');
    expect(closestClientCommand('devics')).toBe('devices');
    expect(closestClientCommand('frobnicate')).toBeUndefined();
  });
});
