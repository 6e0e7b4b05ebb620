import { describe, expect, it } from 'vitest';
import { parseBenchArgs } from '../../bench/options.ts';

describe('bench command line', () => {
  it('runs every section and server on the full plan without flags', () => {
    const options = parseBenchArgs([]);
    expect(options).toMatchObject({ quick: false, only: undefined, kinds: ['relay', 'ws', 'sio'] });
    expect(options.plan).toMatchObject({
      rounds: 3,
      windows: 6,
      scale: [100, 1_000, 3_000, 10_000],
    });
  });

  it('reads every flag the docs and npm scripts use', () => {
    const options = parseBenchArgs([
      '--quick',
      '--only=compare,payloads',
      '--kinds=relay,ws',
      '--rounds=5',
      '--windows=2',
      '--scale=100,10000',
      '--no-pin',
    ]);
    expect(options).toMatchObject({
      quick: true,
      only: ['compare', 'payloads'],
      kinds: ['relay', 'ws'],
      pin: false,
    });
    expect(options.plan).toMatchObject({
      rounds: 5,
      windows: 2,
      scale: [100, 10_000],
      idle: 5_000,
    });
  });

  it('refuses unknown flags, sections and servers and malformed counts with one line', () => {
    for (const [args, message] of [
      [['--bogus'], /Unknown option '--bogus'/],
      [['--only=compare,nope'], /--only: unknown "nope"/],
      [['--kinds=relay,foo'], /--kinds: unknown "foo"/],
      [['--rounds=0'], /--rounds: expected a positive integer, got "0"/],
      [['--scale=100,x'], /--scale: expected a positive integer, got "x"/],
    ] as const) {
      expect(() => parseBenchArgs([...args]), args.join(' ')).toThrow(message);
    }
  });
});
