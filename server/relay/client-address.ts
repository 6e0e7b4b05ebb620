import { BlockList, isIP } from 'node:net';

/**
 * The client address of a connection that may come through reverse proxies: the socket's peer,
 * unless that peer is a trusted proxy (`TRUST_PROXY`); then X-Forwarded-For is read from the
 * right, skipping trusted proxies, and the first address that is not one is the client (what
 * express's `trust proxy` with a list does). A made-up entry further left is never reached.
 */
export type ClientAddressOf = (peer: string, forwardedFor: string | undefined) => string;

/** `::ffff:1.2.3.4` is the IPv4 address 1.2.3.4 (dual-stack sockets report it so). */
const plain = (address: string) =>
  address.startsWith('::ffff:') && isIP(address.slice(7)) === 4 ? address.slice(7) : address;

const familyOf = (address: string) => (isIP(address) === 6 ? 'ipv6' : 'ipv4');

export function clientAddressOf(trustProxy: readonly string[]): {
  /** Whether `peer` is a trusted proxy, whose connections are counted by forwarded address. */
  isProxy(peer: string): boolean;
  addressOf: ClientAddressOf;
} {
  const proxies = new BlockList();
  for (const entry of trustProxy) {
    const [address = '', prefix] = entry.split('/');
    if (prefix === undefined) proxies.addAddress(address, familyOf(address));
    else proxies.addSubnet(address, Number(prefix), familyOf(address));
  }
  const isProxy = (peer: string) => {
    const address = plain(peer);
    return isIP(address) !== 0 && proxies.check(address, familyOf(address));
  };
  return {
    isProxy: trustProxy.length === 0 ? () => false : isProxy,
    addressOf(peer, forwardedFor) {
      let client = plain(peer);
      if (!isProxy(client) || forwardedFor === undefined) return client;
      const hops = forwardedFor.split(',').map((hop) => plain(hop.trim()));
      for (let i = hops.length - 1; i >= 0; i--) {
        const hop = hops[i] as string;
        if (isIP(hop) === 0) return client; // malformed: stop at the last address known good
        client = hop;
        if (!isProxy(hop)) return client;
      }
      return client;
    },
  };
}
