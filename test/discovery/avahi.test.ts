import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

const launcher = resolve(import.meta.dirname, '../../bin/sync-host');
const has = (command: string) => spawnSync('sh', ['-c', `command -v ${command}`]).status === 0;
const tools = ['avahi-daemon', 'avahi-browse', 'avahi-resolve', 'dbus-daemon', 'ip'];
const missing = tools.filter((t) => !has(t));
const canUnshare = spawnSync('unshare', ['-n', '-m', 'true']).status === 0;
const skip =
  missing.length > 0
    ? `${missing.join(', ')} not installed (apt-get install avahi-daemon avahi-utils dbus)`
    : canUnshare
      ? undefined
      : 'unshare -n -m is not permitted here (run as root)';

const dir = mkdtempSync(join(tmpdir(), 'sync-host-avahi-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A system bus of our own for avahi-daemon and its tools, open to every local user. */
const busConfig = `<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>system</type>
  <listen>unix:path=${dir}/bus</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow user="*"/><allow own="*"/><allow send_destination="*"/><allow receive_sender="*"/>
  </policy>
</busconfig>
`;
/** Avahi as a resolver only: it publishes nothing itself, so every answer comes from sync-host. */
const avahiConfig = `[server]
host-name=avahi-probe
use-ipv4=yes
use-ipv6=no
allow-interfaces=veth0
enable-dbus=yes
[publish]
disable-publishing=yes
`;

/**
 * Inside a private network and mount namespace: a veth pair (avahi leaves loopback alone), a
 * private D-Bus and avahi-daemon, and `sync-host --headless` advertising on it. Avahi's own tools
 * then browse and resolve the service. Every process is stopped on exit.
 */
const script = `
set -u
ip link set lo up
ip link add veth0 type veth peer name veth1
ip addr add 10.77.0.1/24 dev veth0
ip link set veth0 multicast on up
ip link set veth1 multicast on up
ip route add 224.0.0.0/4 dev veth0
mount -t tmpfs tmpfs /run
export DBUS_SYSTEM_BUS_ADDRESS=unix:path=${dir}/bus
dbus-daemon --config-file=${dir}/dbus.conf --nofork --nopidfile & bus=$!
host=; avahi=
trap 'kill $host $avahi $bus 2>/dev/null; wait' EXIT
for i in $(seq 50); do [ -S ${dir}/bus ] && break; sleep 0.1; done
avahi-daemon --no-drop-root --no-chroot --no-rlimits -f ${dir}/avahi.conf 2>${dir}/avahi.log & avahi=$!
"${process.execPath}" "${launcher}" --headless --config-dir ${dir} >${dir}/host.out 2>${dir}/host.err & host=$!
for i in $(seq 600); do grep -q '^admin:' ${dir}/host.out 2>/dev/null && break; sleep 0.1; done
echo "auth=$(sed -n 's/^auth: *//p' ${dir}/host.out)"
timeout 10 avahi-browse --resolve --parsable _sync-host._tcp | grep -m1 '^='
echo "resolve=$(timeout 10 avahi-resolve -4 --name "$(hostname -s).local")"
`;

describe.skipIf(skip !== undefined)(
  skip === undefined
    ? 'mDNS record resolved by Avahi (private network namespace)'
    : `mDNS record resolved by Avahi (skipped: ${skip})`,
  () => {
    it('has the SRV target <hostname>.local, resolvable to the host address by avahi-resolve', () => {
      writeFileSync(join(dir, 'dbus.conf'), busConfig);
      writeFileSync(join(dir, 'avahi.conf'), avahiConfig);
      writeFileSync(join(dir, 'auth.conf'), 'PORT=0\nMDNS=on\nLOG_LEVEL=warn\nTLS=off\n');
      writeFileSync(join(dir, 'relay.conf'), 'ws.port=0\nstatus.port=0\n');
      const run = spawnSync('unshare', ['-n', '-m', 'sh', '-c', script], {
        encoding: 'utf8',
        timeout: 60_000,
      });
      expect(run.status, run.stderr).toBe(0);
      const lines = run.stdout.trim().split('\n');
      const authUrl = lines.find((l) => l.startsWith('auth='))?.slice(5) ?? '';
      expect(authUrl).toMatch(/^http:\/\/10\.77\.0\.1:\d+$/);
      // =;iface;protocol;name;type;domain;SRV target;address;port;TXT
      const record = lines.find((l) => l.startsWith('=;'))?.split(';') ?? [];
      const short = hostname().split('.')[0];
      expect(record.slice(4, 9)).toEqual([
        '_sync-host._tcp',
        'local',
        `${short}.local`,
        '10.77.0.1',
        new URL(authUrl).port,
      ]);
      expect(record[9]).toContain(`"auth=${authUrl}"`);
      expect(lines.find((l) => l.startsWith('resolve='))).toBe(`resolve=${short}.local\t10.77.0.1`);
    }, 90_000);
  },
);
