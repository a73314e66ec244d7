// Which web pages may call the engine. Every listener holds or guards credentials, and a browser sends
// requests to 127.0.0.1 on behalf of any page it shows: a `text/plain` POST needs no preflight and used to
// be forwarded with the proxy's key. A browser marks such requests with Origin (every cross-origin request
// but a plain navigation or subresource GET) and, on loopback and https, with Sec-Fetch-Site. Non-browser
// clients (SDKs, curl) send neither, so refusing both when the page is not listed costs them nothing (ADR 1000).

export type OriginVerdict =
  /** Not from a web page, or from one in server.allowedOrigins (then `corsOrigin` is it, for CORS headers). */
  { allowed: true; corsOrigin: string | null } | { allowed: false; reason: string };

const ALLOWED_NO_PAGE: OriginVerdict = { allowed: true, corsOrigin: null };

/** `scheme://host[:port]` as a browser serialises it (lowercase, default port left out); null when not an origin. */
export function normaliseOrigin(value: string): string | null {
  const text = value.trim();
  if (!/^[a-z][a-z0-9+.-]*:\/\/[^/?#\s@]+$/i.test(text)) return null;
  if (/^https?:/i.test(text)) {
    try {
      return new URL(text).origin;
    } catch {
      return null;
    }
  }
  return text.toLowerCase();
}

/**
 * True when a browser request comes from a page of the very origin it is sent to: `origin` (http or https)
 * names the host and port of the request's Host, and Sec-Fetch-Site, when the browser sends it, agrees. Such
 * a page was served by this listener (the management UI): no other site can send this Origin, and a
 * rebinding page's Host is refused before this is asked (ADR 1400).
 */
export function isSameOrigin(origin: string, hostHeader: string | undefined, secFetchSite: string | undefined): boolean {
  if (hostHeader === undefined || (secFetchSite !== undefined && secFetchSite !== 'same-origin')) return false;
  const normalised = normaliseOrigin(origin);
  if (normalised === null || !/^https?:\/\//.test(normalised)) return false;
  try {
    const page = new URL(normalised);
    return page.host === new URL(`${page.protocol}//${hostHeader.trim()}`).host;
  } catch {
    return false;
  }
}

export class OriginPolicy {
  readonly #allowed: ReadonlySet<string>;

  /** `allowedOrigins`: server.allowedOrigins, already normalised by the config validator. */
  constructor(allowedOrigins: readonly string[]) {
    this.#allowed = new Set(allowedOrigins);
  }

  check(origin: string | undefined, secFetchSite: string | undefined): OriginVerdict {
    if (origin !== undefined) {
      const normalised = normaliseOrigin(origin);
      if (normalised !== null && this.#allowed.has(normalised)) return { allowed: true, corsOrigin: origin };
      return {
        allowed: false,
        reason: `Origin ${JSON.stringify(origin)} is not allowed: web pages may not call this proxy unless server.allowedOrigins lists them`,
      };
    }
    // A browser request without Origin: a GET from a tag or a navigation. Only one the user started (none) or
    // from a page of this very origin (same-origin) is not some other site's doing.
    if (secFetchSite === 'cross-site' || secFetchSite === 'same-site') {
      return { allowed: false, reason: `a browser request from another site (Sec-Fetch-Site: ${secFetchSite}) is not allowed` };
    }
    return ALLOWED_NO_PAGE;
  }
}
