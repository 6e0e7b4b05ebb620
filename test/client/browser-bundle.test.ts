import { build } from 'esbuild';
import { describe, expect, it } from 'vitest';

describe('client library in a browser bundle', () => {
  it('bundles with the Yjs provider and encryption for the browser, with no Node module', async () => {
    // esbuild refuses Node's built-in modules (fs, node:crypto...) when the platform is browser.
    const result = await build({
      entryPoints: ['client/index.ts'],
      bundle: true,
      platform: 'browser',
      format: 'esm',
      write: false,
      metafile: true,
      logLevel: 'silent',
    });
    const inputs = Object.keys(result.metafile.inputs);
    expect(inputs).toContain('client/yjs-provider.ts');
    expect(inputs).toContain('client/e2e-key.ts');
    expect(inputs.some((input) => input.startsWith('node_modules/yjs/'))).toBe(true);
    expect(result.warnings).toEqual([]);
  });
});
