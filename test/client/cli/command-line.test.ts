import { describe, expect, it } from 'vitest';
import { parseCommandLine } from '../../../client/cli/context.ts';

/**
 * The client's command line: a value that starts with `-` (a base64url fingerprint does one time
 * in 64) is taken as its option's value, never refused as ambiguous; an option still is one.
 */
describe('the client command line', () => {
  it('takes a fingerprint that starts with a dash as the value of --fingerprint', () => {
    const fingerprint = '-Xq3yXb0AqgdW7PUK1JEJ8YFJn4mu1kEDpO8wt3OBF0';
    const { values, positionals } = parseCommandLine([
      'login',
      '--auth',
      'https://host:8445',
      '--fingerprint',
      fingerprint,
    ]);
    expect(values.fingerprint).toBe(fingerprint);
    expect(values.auth).toBe('https://host:8445');
    expect(positionals).toEqual(['login']);
  });

  it('still reads an option after an option that takes a value as an option', () => {
    expect(() => parseCommandLine(['login', '--fingerprint', '--auth', 'x'])).toThrow(
      /--fingerprint needs a value/,
    );
    expect(() => parseCommandLine(['status', '--account', '-h'])).toThrow(
      /--account needs a value/,
    );
  });
});
