import { describe, expect, it } from 'vitest';
import { HostAllowList, hostnameOf, normaliseAllowedHost } from './allowed-hosts.ts';

const machine = { hostname: 'devbox', interfaceAddresses: ['127.0.0.1', '::1', '192.168.1.20', 'fe80::1'] };

describe('HostAllowList', () => {
  it('answers to loopback names and addresses, with or without a port', () => {
    const hosts = new HostAllowList({ listenHost: '127.0.0.1', allowedHosts: [], ...machine });
    for (const host of ['127.0.0.1:8181', '127.0.0.1', 'localhost:8181', 'LOCALHOST', 'localhost.', 'app.localhost:8181', '[::1]:8181', '127.0.0.2', '[::ffff:127.0.0.1]']) {
      expect(hosts.allows(host), host).toBe(true);
    }
  });

  it("answers to the machine's own name and addresses, the pod IP and the listen address", () => {
    const hosts = new HostAllowList({ listenHost: '10.9.8.7', allowedHosts: [], podIp: '10.4.0.17', ...machine });
    for (const host of ['devbox:8181', '192.168.1.20', '[fe80::1]:8181', '10.4.0.17:15181', '10.9.8.7']) expect(hosts.allows(host), host).toBe(true);
  });

  it('refuses any other name: a rebound DNS name, a name resolving to loopback, a foreign address', () => {
    const hosts = new HostAllowList({ listenHost: '0.0.0.0', allowedHosts: [], ...machine });
    for (const host of ['rebind.evil.example', 'rebind.evil.example:8181', '127.0.0.1.nip.io', 'localhost.evil.example', '10.0.0.1', '', ':8181', '[::1']) {
      expect(hosts.allows(host), host).toBe(false);
    }
    expect(hosts.allows('0.0.0.0:8181')).toBe(false); // a wildcard listen address is not a name
  });

  it('adds the configured names: exact, subdomains with *., or any with *', () => {
    const hosts = new HostAllowList({ listenHost: '0.0.0.0', allowedHosts: ['tollgate.internal', '*.corp.example'], ...machine });
    expect(hosts.allows('tollgate.internal:8181')).toBe(true);
    expect(hosts.allows('llm.corp.example')).toBe(true);
    expect(hosts.allows('corp.example')).toBe(false);
    expect(hosts.allows('evilcorp.example')).toBe(false);
    expect(new HostAllowList({ listenHost: '0.0.0.0', allowedHosts: ['*'], ...machine }).allows('anything.example')).toBe(true);
  });

  it('says whether a Host names the engine itself, which `*` does not make any name do', () => {
    const any = new HostAllowList({ listenHost: '127.0.0.1', allowedHosts: ['*', 'tollgate.internal'], ...machine });
    expect(any.allows('rebind.evil.example')).toBe(true);
    expect(any.namesEngine('rebind.evil.example')).toBe(false);
    expect(any.namesEngine('127.0.0.1:8181')).toBe(true);
    expect(any.namesEngine('tollgate.internal')).toBe(true);
    expect(any.namesEngine(undefined)).toBe(false);
  });

  it('lets a request without Host through: HTTP/1.0 clients, never a browser', () => {
    expect(new HostAllowList({ listenHost: '127.0.0.1', allowedHosts: [], ...machine }).allows(undefined)).toBe(true);
  });
});

describe('hostnameOf and normaliseAllowedHost', () => {
  it('takes the name out of a Host header', () => {
    expect(hostnameOf('Example.COM:443')).toBe('example.com');
    expect(hostnameOf('[2001:db8::1]:80')).toBe('2001:db8::1');
  });

  it('accepts names, addresses and patterns, refuses what is none of them', () => {
    expect(normaliseAllowedHost('Tollgate.Internal')).toBe('tollgate.internal');
    expect(normaliseAllowedHost('[::1]')).toBe('::1');
    expect(normaliseAllowedHost('*.corp.example')).toBe('*.corp.example');
    expect(normaliseAllowedHost('*')).toBe('*');
    for (const bad of ['http://tollgate.internal', 'a b', 'host:8181', '*.', '-bad.example', '']) expect(normaliseAllowedHost(bad), bad).toBeNull();
  });
});
