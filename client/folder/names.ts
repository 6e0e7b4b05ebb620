/**
 * The one check every file name of a synced folder passes, whether it came from another device
 * or was read from this one's disk: a relative, `/`-separated path that names a file inside the
 * folder on Linux, macOS and Windows alike. A name that fails is never written, read or deleted;
 * the folder sync skips it with one line.
 */

/** Longest name of one folder or file, in UTF-8 bytes (ext4, APFS, NTFS). */
export const maxSegmentBytes = 255;
/** Longest relative path, in UTF-8 bytes (well under Linux's 4096 with the folder's own path). */
export const maxPathBytes = 2_048;

const encoder = new TextEncoder();
/** Characters Windows refuses in a name, and every control character. */
// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what it finds
const forbiddenCharacters = /[\u0000-\u001f\u007f<>:"|?*\\]/;
/** Device names Windows reserves, whatever the extension (`con.txt` included). */
const reservedOnWindows = /^(con|prn|aux|nul|com[0-9¹²³]|lpt[0-9¹²³])(\.|$)/i;
/** A UTF-16 surrogate without its other half: a name that is not valid UTF-8 on disk. */
const loneSurrogate = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/**
 * Version-control folders: their files run commands (`core.fsmonitor` in `.git/config`, hooks in
 * `.hg/hgrc`), so no rule can make them sync. Compared case-insensitively (macOS, Windows).
 */
const versionControlFolders: ReadonlySet<string> = new Set(['.git', '.hg', '.svn', '.bzr']);
/** Names of sync-host's own files in the folder: `.sync-host-folder`, `….sync-host-tmp`. */
const reservedPrefix = '.sync-host';
const reservedSuffix = '.sync-host-tmp';

/** Why `path` cannot be a synced file's name, or undefined when it can. */
export function pathProblem(path: unknown): string | undefined {
  if (typeof path !== 'string') return 'the name is not a string';
  if (path === '') return 'the name is empty';
  if (loneSurrogate.test(path)) return 'the name is not valid Unicode';
  if (encoder.encode(path).length > maxPathBytes) return `the path is over ${maxPathBytes} bytes`;
  if (path.startsWith('/')) return 'the path is absolute';
  for (const segment of path.split('/')) {
    const problem = segmentProblem(segment);
    if (problem !== undefined) return problem;
  }
  return undefined;
}

function segmentProblem(segment: string): string | undefined {
  if (segment === '') return 'the path has an empty part (// or a trailing /)';
  if (segment === '.' || segment === '..') return `the path has a "${segment}" part`;
  if (versionControlFolders.has(segment.toLowerCase())) {
    return `a ${segment} folder is never synced (what it holds can run commands)`;
  }
  if (segment.toLowerCase().startsWith(reservedPrefix) || segment.endsWith(reservedSuffix)) {
    return 'the name is one sync-host keeps for itself';
  }
  if (forbiddenCharacters.test(segment)) {
    return 'the name has a control character, a backslash or one of <>:"|?*';
  }
  if (segment.endsWith(' ') || segment.endsWith('.')) {
    return 'a part of the path ends with a space or a dot (not allowed on Windows)';
  }
  if (reservedOnWindows.test(segment)) return `"${segment}" is a reserved name on Windows`;
  if (encoder.encode(segment).length > maxSegmentBytes) {
    return `a part of the path is over ${maxSegmentBytes} bytes`;
  }
  return undefined;
}

/** The folders above `path`, nearest the root first: `a/b/c` → `a`, `a/b`. */
export function parentsOf(path: string): string[] {
  const parts = path.split('/');
  const parents: string[] = [];
  for (let i = 1; i < parts.length; i += 1) parents.push(parts.slice(0, i).join('/'));
  return parents;
}
