import { isIP } from 'node:net';

/**
 * The key a per-address limit counts a client under: an IPv4 address as it is, an IPv6 address
 * by its /64 (`2001:db8:1:2::/64`). One subscriber or one machine usually holds a whole /64, so
 * counting its addresses one by one would give it as many places as it cares to take. Anything
 * else (an unknown address) is its own key.
 */
export function addressGroup(address: string): string {
  const plain =
    address.startsWith('::ffff:') && isIP(address.slice(7)) === 4 ? address.slice(7) : address;
  if (isIP(plain) !== 6) return plain;
  const [head = '', tail] = (plain.split('%')[0] ?? '').split('::');
  const left = head === '' ? [] : head.split(':');
  // `::` stands for the zero groups between `left` and the tail; an IPv4 tail (`::1.2.3.4`)
  // sits in the last 32 bits, so the first four groups are always hexadecimal
  const right = tail === undefined || tail === '' ? [] : tail.split(':');
  const groups = [...left, '0', '0', '0', '0'].slice(0, tail === undefined ? 8 : 8 - right.length);
  const prefix = [...groups, ...right].slice(0, 4);
  return `${prefix.map((g) => Number.parseInt(g, 16).toString(16)).join(':')}::/64`;
}
