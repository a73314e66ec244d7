// The provider endpoints a connection from the pod may not reach except through the sidecar (ADR 1601): every
// route's upstream as the sidecar would call it (upstreams.<route>.baseUrl and its endpoints, else the built-in
// default) plus provenance.bypass.extraHosts, resolved to addresses the way the sidecar's own calls resolve them
// (the system resolver, every address). Host names are resolved again every resolveIntervalMs; the set is
// bounded in hosts and addresses per host.

import { lookup } from 'node:dns/promises';
import { isIP } from 'node:net';
import type { RuntimeConfig } from '../../../contracts/runtime-config.ts';
import { costsNothing } from '../pricing/provider-pricing.ts';
import { routeCatalog } from '../routes/route-catalog.ts';
import { routeBaseUrl, upstreamOf } from '../routes/upstream-base-url.ts';

export interface ProviderHost {
  host: string;
  port: number;
  provider: string;
}

export const MAX_PROVIDER_HOSTS = 256;
const LOOPBACK = /^(localhost|127\.|::1$)/;
export const MAX_ADDRESSES_PER_HOST = 16;

function hostOf(url: string, provider: string): ProviderHost | undefined {
  try {
    const u = new URL(url);
    const port = u.port ? Number(u.port) : u.protocol === 'http:' ? 80 : 443;
    return { host: u.hostname.replace(/^\[|\]$/g, ''), port, provider };
  } catch {
    return undefined;
  }
}

/** The hosts of every route's upstream under `config`, and the extra ones, without duplicates. */
export function providerHosts(config: RuntimeConfig, extraHosts: readonly string[], env: NodeJS.ProcessEnv = process.env): ProviderHost[] {
  const found = new Map<string, ProviderHost>();
  const add = (h: ProviderHost | undefined) => {
    if (h && found.size < MAX_PROVIDER_HOSTS && !found.has(`${h.host}|${h.port}`)) found.set(`${h.host}|${h.port}`, h);
  };
  for (const route of routeCatalog(config).all()) {
    // A runtime that bills nothing (the local one) has nothing a straight connection would leave unmetered.
    if (costsNothing(route.provider)) continue;
    const upstream = hostOf(routeBaseUrl(route, config, env), route.provider);
    // A default on loopback (a local runtime such as Ollama) is the pod's own business; one configured is not.
    if (upstream && !upstreamOf(route, config)?.baseUrl && LOOPBACK.test(upstream.host)) continue;
    add(upstream);
    for (const endpoint of upstreamOf(route, config)?.endpoints ?? []) if (endpoint.baseUrl) add(hostOf(endpoint.baseUrl, route.provider));
  }
  for (const extra of extraHosts) {
    const at = extra.lastIndexOf(':');
    add({ host: extra.slice(0, at), port: Number(extra.slice(at + 1)), provider: 'other' });
  }
  return [...found.values()];
}

export class ProviderEndpoints {
  /** `address|port` → provider. */
  #byAddress = new Map<string, string>();

  get size(): number {
    return this.#byAddress.size;
  }

  /** Resolves every host (a host that does not resolve is left out until the next round). */
  async refresh(hosts: readonly ProviderHost[]): Promise<void> {
    const next = new Map<string, string>();
    await Promise.all(
      hosts.map(async (h) => {
        let addresses: string[] = [h.host];
        if (isIP(h.host) === 0) {
          try {
            addresses = (await lookup(h.host, { all: true })).map((a) => a.address).slice(0, MAX_ADDRESSES_PER_HOST);
          } catch {
            addresses = [];
          }
        }
        for (const address of addresses) next.set(`${address}|${h.port}`, h.provider);
      }),
    );
    this.#byAddress = next;
  }

  /** The provider at `address:port`, or undefined. */
  providerAt(address: string, port: number): string | undefined {
    return this.#byAddress.get(`${address}|${port}`);
  }
}
