// Which names a listener answers to. A web page can point a DNS name it controls at 127.0.0.1 after the
// browser has resolved it once (DNS rebinding); its scripts then talk to the proxy as "same origin", with the
// attacker's name in the Host header. Answering only to the machine's own names and addresses, and to names
// the operator lists, closes that door (ADR 1000). An IP literal or a loopback name cannot be re-pointed by
// anyone else, so the machine's own addresses are always accepted; any other name must be listed.

import { isIP } from 'node:net';
import { hostname as osHostname, networkInterfaces } from 'node:os';

export interface HostAllowListOptions {
  /** The address the listener binds (server.host, --host): a specific name or address is one of its names. */
  listenHost: string;
  /** server.allowedHosts: exact names or addresses, `*.example.com` for subdomains, or `*` for any host. */
  allowedHosts: readonly string[];
  /** The pod's IP from the downward API (TOLLGATE_POD_IP), when set. */
  podIp?: string | undefined;
  /** This machine's host name (in a pod: the pod's name); default os.hostname(). */
  hostname?: string;
  /** This machine's interface addresses; default os.networkInterfaces(). */
  interfaceAddresses?: readonly string[];
}

const WILDCARD_LISTEN = new Set(['0.0.0.0', '::', '[::]', '']);

/** The lowercased host name of a Host header value, without port, brackets or a trailing dot; null when it has none. */
export function hostnameOf(hostHeader: string): string | null {
  let host = hostHeader.trim().toLowerCase();
  if (host.startsWith('[')) {
    const end = host.indexOf(']');
    if (end === -1) return null;
    host = host.slice(1, end);
  } else {
    const colon = host.indexOf(':');
    // one colon: name:port; more: an unbracketed IPv6 address, which a Host header may not carry, but a name it is
    if (colon !== -1 && host.indexOf(':', colon + 1) === -1) host = host.slice(0, colon);
  }
  if (host.endsWith('.')) host = host.slice(0, -1);
  return host === '' ? null : host;
}

export function isLoopbackHostname(name: string): boolean {
  if (name === 'localhost' || name.endsWith('.localhost')) return true;
  if (isIP(name) === 4) return name.startsWith('127.');
  if (isIP(name) === 6) return name === '::1' || name === '0:0:0:0:0:0:0:1' || /^::ffff:127\./.test(name);
  return false;
}

function machineAddresses(): string[] {
  const out: string[] = [];
  for (const list of Object.values(networkInterfaces())) for (const entry of list ?? []) out.push(entry.address.toLowerCase());
  return out;
}

export class HostAllowList {
  readonly #exact = new Set<string>();
  readonly #suffixes: string[] = [];
  readonly #any: boolean;
  /** Host header values already judged allowed, as sent: a caller sends the same one on every call. */
  readonly #seen = new Set<string>();

  constructor(opts: HostAllowListOptions) {
    this.#any = opts.allowedHosts.includes('*');
    const add = (value: string | undefined) => {
      const name = value === undefined ? null : hostnameOf(value);
      if (name !== null) this.#exact.add(name);
    };
    if (!WILDCARD_LISTEN.has(opts.listenHost)) add(opts.listenHost);
    add(opts.podIp);
    add(opts.hostname ?? osHostname());
    for (const address of opts.interfaceAddresses ?? machineAddresses()) add(address);
    for (const entry of opts.allowedHosts) {
      if (entry === '*') continue;
      if (entry.startsWith('*.')) this.#suffixes.push(entry.slice(1).toLowerCase());
      else add(entry);
    }
  }

  /** True when a request with this Host header may be served. A request without one (HTTP/1.0) is not a browser's. */
  allows(hostHeader: string | undefined): boolean {
    if (this.#any || hostHeader === undefined) return true;
    return this.namesEngine(hostHeader);
  }

  /**
   * True when the Host names this engine: loopback, its own names and addresses, or a listed name; the `*` that
   * turns the check off does not count. A page served under such a name is the engine's own (its UI).
   */
  namesEngine(hostHeader: string | undefined): boolean {
    if (hostHeader === undefined) return false;
    if (this.#seen.has(hostHeader)) return true;
    const name = hostnameOf(hostHeader);
    if (name === null) return false;
    const allowed = isLoopbackHostname(name) || this.#exact.has(name) || this.#suffixes.some((suffix) => name.endsWith(suffix) && name.length > suffix.length);
    // Bounded: only allowed values are kept, and a caller cannot mint many of those.
    if (allowed && this.#seen.size < 256) this.#seen.add(hostHeader);
    return allowed;
  }
}

/** Checks one server.allowedHosts entry; returns it normalised, or null when it is not a host pattern. */
export function normaliseAllowedHost(entry: string): string | null {
  const value = entry.trim().toLowerCase();
  if (value === '*') return value;
  const bare = value.startsWith('[') && value.endsWith(']') ? value.slice(1, -1) : value;
  if (isIP(bare) !== 0) return bare;
  const name = bare.startsWith('*.') ? bare.slice(2) : bare;
  const label = /^[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?$/;
  const labels = name.replace(/\.$/, '').split('.');
  if (name.length > 253 || labels.some((part) => !label.test(part))) return null;
  return bare.replace(/\.$/, '');
}
