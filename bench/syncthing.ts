/**
 * Two Syncthing instances on loopback, for the folder section of `npm run bench:sync`
 * (bench/sync-folders.ts): each with its own home in a temp folder, listening on 127.0.0.1 only,
 * with global and local discovery, relays, NAT traversal, usage reporting, crash reporting and
 * upgrades off (set in its config.xml before its first start, so it never listens or announces
 * anywhere else). The two devices are introduced to each other and share one folder through
 * their REST APIs.
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { freePort } from '../test/helpers/ports.ts';
import { eventually } from '../test/helpers/wait.ts';

/** The `syncthing` binary (SYNCTHING to name another), or undefined when it is not installed. */
export function syncthingBinary(): string | undefined {
  const binary = process.env.SYNCTHING ?? 'syncthing';
  const probe = spawnSync(binary, ['--version'], { encoding: 'utf8' });
  return probe.status === 0 ? binary : undefined;
}

/** config.xml elements set before the first start: `<name>default</name>` to the value. */
function loopbackOptions(listenPort: number): [string, string][] {
  return [
    ['listenAddress', `tcp://127.0.0.1:${listenPort}`],
    ['globalAnnounceEnabled', 'false'],
    ['localAnnounceEnabled', 'false'],
    ['relaysEnabled', 'false'],
    ['natEnabled', 'false'],
    ['startBrowser', 'false'],
    ['urAccepted', '-1'],
    ['autoUpgradeIntervalH', '0'],
    ['crashReportingEnabled', 'false'],
    // Syncthing lowers its own scheduling priority by default; the processes it is compared
    // with run at the normal one.
    ['setLowPriority', 'false'],
  ];
}

function rewriteConfig(path: string, listenPort: number): void {
  let xml = readFileSync(path, 'utf8');
  for (const [name, value] of loopbackOptions(listenPort)) {
    const pattern = new RegExp(`<${name}>[^<]*</${name}>`);
    if (!pattern.test(xml)) throw new Error(`syncthing config.xml has no <${name}>`);
    xml = xml.replace(pattern, `<${name}>${value}</${name}>`);
  }
  writeFileSync(path, xml);
}

/** One running instance and its REST API. */
export class SyncthingInstance {
  deviceId = '';
  private constructor(
    readonly home: string,
    readonly listenPort: number,
    readonly child: ChildProcess,
    private readonly guiUrl: string,
    private readonly apiKey: string,
    readonly output: string[],
  ) {}

  static async start(binary: string, home: string): Promise<SyncthingInstance> {
    mkdirSync(home, { recursive: true });
    const generated = spawnSync(
      binary,
      ['generate', `--home=${home}`, '--no-default-folder', '--skip-port-probing'],
      { encoding: 'utf8' },
    );
    if (generated.status !== 0) throw new Error(`syncthing generate: ${generated.stderr}`);
    const listenPort = await freePort();
    rewriteConfig(join(home, 'config.xml'), listenPort);
    const guiPort = await freePort();
    const apiKey = `bench-${process.pid}-${listenPort}`;
    const child = spawn(
      binary,
      [
        'serve',
        `--home=${home}`,
        '--no-browser',
        '--no-restart',
        '--no-upgrade',
        '--no-default-folder',
        `--gui-address=http://127.0.0.1:${guiPort}`,
        `--gui-apikey=${apiKey}`,
      ],
      { env: { ...process.env, STNOUPGRADE: '1', STNODEFAULTFOLDER: '1' }, stdio: 'pipe' },
    );
    const output: string[] = [];
    child.stdout?.on('data', (chunk: Buffer) => output.push(chunk.toString()));
    child.stderr?.on('data', (chunk: Buffer) => output.push(chunk.toString()));
    const instance = new SyncthingInstance(
      home,
      listenPort,
      child,
      `http://127.0.0.1:${guiPort}`,
      apiKey,
      output,
    );
    const status = await eventually(
      () => instance.rest<{ myID: string }>('GET', '/rest/system/status').catch(() => undefined),
      'syncthing REST API up',
      30_000,
    );
    instance.deviceId = status.myID;
    return instance;
  }

  async rest<T>(method: string, path: string, body?: unknown): Promise<T> {
    if (this.child.exitCode !== null) {
      throw new Error(`syncthing exited with ${this.child.exitCode}: ${this.output.join('')}`);
    }
    const res = await fetch(`${this.guiUrl}${path}`, {
      method,
      headers: { 'X-API-Key': this.apiKey, 'Content-Type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    if (!res.ok) throw new Error(`syncthing ${method} ${path}: ${res.status} ${await res.text()}`);
    const text = await res.text();
    return (text === '' ? undefined : JSON.parse(text)) as T;
  }

  /** Knows `peer` at its loopback address. */
  async introduce(peer: SyncthingInstance): Promise<void> {
    await this.rest('POST', '/rest/config/devices', {
      deviceID: peer.deviceId,
      name: peer.home,
      addresses: [`tcp://127.0.0.1:${peer.listenPort}`],
      compression: 'metadata',
    });
  }

  /**
   * Shares the folder `id` at `path` with `peer`. The watcher on with its shortest delay (1 s);
   * the bench asks for a scan as soon as it has written, so no watcher delay is timed.
   */
  async share(id: string, path: string, peer: SyncthingInstance): Promise<void> {
    await this.rest('POST', '/rest/config/folders', {
      id,
      label: id,
      path,
      type: 'sendreceive',
      devices: [{ deviceID: this.deviceId }, { deviceID: peer.deviceId }],
      fsWatcherEnabled: true,
      fsWatcherDelayS: 1,
      rescanIntervalS: 3600,
    });
  }

  async connectedTo(peer: SyncthingInstance): Promise<boolean> {
    const all = await this.rest<{ connections: Record<string, { connected: boolean }> }>(
      'GET',
      '/rest/system/connections',
    );
    return all.connections[peer.deviceId]?.connected === true;
  }

  async folderIdle(id: string): Promise<boolean> {
    const status = await this.rest<{ state: string }>('GET', `/rest/db/status?folder=${id}`);
    return status.state === 'idle';
  }

  /**
   * Asks for a scan now. The request answers when the scan is done; with 10,000 files Syncthing
   * may close it before, and the scan goes on: a closed request is not a failure here (the bench
   * waits for the files on B in any case).
   */
  async scan(id: string): Promise<void> {
    await this.rest('POST', `/rest/db/scan?folder=${id}`).catch((err: unknown) => {
      if (!(err instanceof TypeError)) throw err;
    });
  }

  /** Bytes in and out on every connection to other devices since the start (Syncthing's count). */
  async totals(): Promise<{ in: number; out: number }> {
    const all = await this.rest<{ total: { inBytesTotal: number; outBytesTotal: number } }>(
      'GET',
      '/rest/system/connections',
    );
    return { in: all.total.inBytesTotal, out: all.total.outBytesTotal };
  }

  async stop(): Promise<void> {
    if (this.child.exitCode !== null) return;
    const exited = once(this.child, 'exit');
    this.child.kill('SIGTERM');
    const timer = setTimeout(() => this.child.kill('SIGKILL'), 10_000);
    await exited;
    clearTimeout(timer);
  }
}

/**
 * Two instances sharing folder `id` between `dirA` and `dirB`, connected and idle (homes under
 * `root`).
 */
export async function syncthingPair(
  binary: string,
  root: string,
  id: string,
  dirA: string,
  dirB: string,
): Promise<[SyncthingInstance, SyncthingInstance]> {
  const a = await SyncthingInstance.start(binary, join(root, 'home-a'));
  const b = await SyncthingInstance.start(binary, join(root, 'home-b')).catch(async (err) => {
    await a.stop();
    throw err;
  });
  try {
    await a.introduce(b);
    await b.introduce(a);
    await a.share(id, dirA, b);
    await b.share(id, dirB, a);
    await eventually(
      async () => (await a.connectedTo(b)) && (await b.connectedTo(a)),
      'the two syncthing instances connected',
      60_000,
    );
    await eventually(
      async () => (await a.folderIdle(id)) && (await b.folderIdle(id)),
      'the shared folder idle on both',
      60_000,
    );
    return [a, b];
  } catch (err: unknown) {
    await a.stop();
    await b.stop();
    throw err;
  }
}
