/** The value of one metric (`name` with its labels, as written) on a status port's `/metrics`. */
export async function metricAt(statusUrl: string, name: string): Promise<number> {
  const text = await (await fetch(`${statusUrl}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${name} `));
  if (line === undefined) throw new Error(`no ${name} in /metrics`);
  return Number(line.slice(name.length + 1));
}
