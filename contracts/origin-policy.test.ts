import { describe, expect, it } from 'vitest';
import { isSameOrigin, normaliseOrigin, OriginPolicy } from './origin-policy.ts';

describe('OriginPolicy', () => {
  const none = new OriginPolicy([]);
  const devApp = new OriginPolicy(['http://localhost:3000']);

  it('lets non-browser clients through: no Origin, no Sec-Fetch-Site', () => {
    expect(none.check(undefined, undefined)).toEqual({ allowed: true, corsOrigin: null });
  });

  it('refuses every page by default, its own origin and the opaque "null" included', () => {
    for (const origin of ['http://evil.example', 'http://127.0.0.1:8181', 'null']) expect(none.check(origin, 'cross-site').allowed, origin).toBe(false);
  });

  it('refuses a cross-site or same-site browser request without Origin (a GET from a tag), but not one the user started', () => {
    expect(none.check(undefined, 'cross-site').allowed).toBe(false);
    expect(none.check(undefined, 'same-site').allowed).toBe(false);
    expect(none.check(undefined, 'none').allowed).toBe(true);
    expect(none.check(undefined, 'same-origin').allowed).toBe(true);
  });

  it('lets a listed page in, and names it for the CORS answer', () => {
    expect(devApp.check('http://localhost:3000', 'same-site')).toEqual({ allowed: true, corsOrigin: 'http://localhost:3000' });
    expect(devApp.check('http://localhost:3001', 'same-site').allowed).toBe(false);
  });

  it('normalises origins as browsers serialise them', () => {
    expect(normaliseOrigin('HTTP://LocalHost:80')).toBe('http://localhost');
    expect(normaliseOrigin('https://app.example:8443')).toBe('https://app.example:8443');
    expect(normaliseOrigin('vscode-webview://ABC123')).toBe('vscode-webview://abc123');
    for (const bad of ['http://localhost:3000/', 'localhost:3000', 'http://user@host', '*']) expect(normaliseOrigin(bad), bad).toBeNull();
  });
});

describe('isSameOrigin', () => {
  it('is true for a page of the very host and port the request is sent to (the management UI calling its API)', () => {
    expect(isSameOrigin('http://127.0.0.1:8181', '127.0.0.1:8181', 'same-origin')).toBe(true);
    expect(isSameOrigin('http://LOCALHOST:8181', 'localhost:8181', undefined)).toBe(true);
    expect(isSameOrigin('https://tollgate.corp.example', 'tollgate.corp.example:443', 'same-origin')).toBe(true);
  });

  it('is false for any other page: another port, another name, a scheme that is not the web, or a browser that says otherwise', () => {
    expect(isSameOrigin('http://127.0.0.1:1234', '127.0.0.1:8181', 'same-site')).toBe(false);
    expect(isSameOrigin('http://localhost:8181', '127.0.0.1:8181', 'cross-site')).toBe(false);
    expect(isSameOrigin('http://127.0.0.1:8181', '127.0.0.1:8181', 'cross-site')).toBe(false);
    expect(isSameOrigin('null', '127.0.0.1:8181', undefined)).toBe(false);
    expect(isSameOrigin('chrome-extension://abc', 'abc', undefined)).toBe(false);
    expect(isSameOrigin('http://127.0.0.1:8181', undefined, 'same-origin')).toBe(false);
    expect(isSameOrigin('http://127.0.0.1:8181', 'bad host:x', 'same-origin')).toBe(false);
  });
});
