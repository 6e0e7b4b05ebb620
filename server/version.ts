import { createRequire } from 'node:module';

/** The package version (semver), shown by --version and advertised over mDNS. */
export const version: string = (
  createRequire(import.meta.url)('../package.json') as { version: string }
).version;
