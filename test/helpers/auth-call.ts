/**
 * A call of the auth API at `base` with a device token, as a device makes it; the answer's
 * status and JSON body. Free of the test runner, so that the benches use it too.
 */
export async function authCall(
  base: string,
  token: string,
  method: string,
  path: string,
  body?: unknown,
): Promise<{ status: number; body: unknown }> {
  const res = await fetch(`${base}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${token}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await res.text();
  return { status: res.status, body: text === '' ? undefined : (JSON.parse(text) as unknown) };
}
