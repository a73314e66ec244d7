// Health checks of the node's components, made from the machine over the veth to the node's address.

import { Resolver } from 'node:dns/promises';
import { request } from 'node:https';

/** Status of an HTTPS GET to a component serving a self-signed certificate (scheduler, controller-manager). */
export function selfSignedHttpsStatus(url: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request(url, { rejectUnauthorized: false, agent: false, timeout: 5_000 }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('timeout', () => req.destroy(new Error(`no answer from ${url}`)));
    req.on('error', reject);
    req.end();
  });
}

export async function httpStatus(url: string): Promise<number> {
  const res = await fetch(url, { signal: AbortSignal.timeout(5_000) });
  await res.arrayBuffer();
  return res.status;
}

/** The A records the cluster DNS server at `server` gives for `name`. */
export async function clusterDnsLookup(server: string, name: string): Promise<string[]> {
  const resolver = new Resolver({ timeout: 2_000, tries: 1 });
  resolver.setServers([server]);
  return resolver.resolve4(name);
}
