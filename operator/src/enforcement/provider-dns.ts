// Resolves provider host names for the bypass policy (ADR 1602) without holding up the ProxyConfig reconcile:
// a bounded DNS query per name (timeout and tries), the name fully qualified (a trailing dot, so the pod's
// ndots search list does not turn one lookup into several), and a few names at a time.

import { Resolver } from 'node:dns/promises';

export type HostResolver = (host: string) => Promise<string[]>;

const TIMEOUT_MS = 2_000;
const TRIES = 2;
const PARALLEL = 4;

export const resolveWithDns: HostResolver = async (host) => {
  const resolver = new Resolver({ timeout: TIMEOUT_MS, tries: TRIES });
  const fqdn = host.endsWith('.') ? host : `${host}.`;
  const [v4, v6] = await Promise.allSettled([resolver.resolve4(fqdn), resolver.resolve6(fqdn)]);
  const addresses = [...(v4.status === 'fulfilled' ? v4.value : []), ...(v6.status === 'fulfilled' ? v6.value : [])];
  // A name with only A (or only AAAA) records is fine; one with neither did not resolve.
  if (addresses.length === 0) throw v4.status === 'rejected' ? (v4.reason as Error) : new Error(`${host} has no address`);
  return addresses;
};

/** Each host's addresses, or undefined where resolving failed; at most PARALLEL lookups at once. */
export async function resolveHosts(hosts: readonly string[], resolve: HostResolver): Promise<Map<string, string[] | undefined>> {
  const answers = new Map<string, string[] | undefined>();
  const queue = [...hosts];
  const worker = async () => {
    for (let host = queue.shift(); host !== undefined; host = queue.shift()) {
      answers.set(host, await resolve(host).catch(() => undefined));
    }
  };
  await Promise.all(Array.from({ length: Math.min(PARALLEL, hosts.length) }, worker));
  return answers;
}
