import packageJson from '../package.json' with { type: 'json' };

/** The package version (semver), shown by --version and advertised over mDNS. */
export const version: string = packageJson.version;
