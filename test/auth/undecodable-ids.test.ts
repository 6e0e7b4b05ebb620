import { afterEach, describe, expect, it } from 'vitest';
import { startTestHost, type TestHost } from '../helpers/host.ts';

let th: TestHost | undefined;
afterEach(async () => {
  await th?.close();
  th = undefined;
});

describe('ids in the path that are not valid percent-encoding', () => {
  it('answer 400 invalid_request on every route with an id, log no stack and change nothing', async () => {
    const logs: string[] = [];
    th = await startTestHost({ ui: false, logs });
    const me = await th.signIn('ids@example.com');
    const token = th.host.adminToken;
    const cases: Array<[string, string, string | undefined]> = [
      ['GET', '/auth/pair/%ff', undefined],
      ['GET', '/auth/pair/%zz', undefined],
      ['DELETE', '/auth/device/%ff', me.deviceToken],
      ['DELETE', '/auth/device/%ff', undefined],
      ['DELETE', '/auth/project/%zz', me.deviceToken],
      ['GET', '/relay/devices/%ff', undefined],
      ['DELETE', '/admin/api/devices/%ff', token],
      ['DELETE', '/admin/api/users/%e0%a4%a', token],
      ['PUT', '/admin/api/users/%ff/subscription', token],
      ['DELETE', '/admin/api/projects/%zz', token],
    ];
    for (const [method, path, bearer] of cases) {
      const res = await fetch(`${th.base}${path}`, {
        method,
        headers: bearer === undefined ? {} : { Authorization: `Bearer ${bearer}` },
      });
      expect(res.status, `${method} ${path}`).toBe(400);
      expect(await res.json(), `${method} ${path}`).toEqual({
        error: { code: 'invalid_request', message: expect.stringContaining('percent-encoding') },
      });
    }
    // paths without a parameter are not decoded: no route, or the UI's own 404
    for (const path of ['/%ff', '/admin/%ff', '/auth/%zz', '/admin/api/%ff']) {
      const res = await fetch(`${th.base}${path}`, {
        headers: { Authorization: `Bearer ${token}` },
      });
      expect(res.status, path).toBeLessThan(500);
    }
    expect(logs.join('\n')).not.toMatch(/unhandled error|URIError|at .*\.[jt]s:\d+/);
    const devices = (await th.admin('GET', '/devices')).body as { devices: unknown[] };
    expect(devices.devices).toHaveLength(1);
  });
});
