// A small JSON client for the Kubernetes API on top of @kubernetes/client-node's KubeConfig (which supplies
// the server URL, TLS and authentication). The generated typed clients cover one call per resource; the
// operator needs the same few verbs on core, custom and coordination resources, and Status errors with
// their code, reason and message kept intact so callers can tell 404, 409 and 410 apart.

import { createHash } from 'node:crypto';
import type { RequestOptions as HttpsRequestOptions } from 'node:https';
import { type KubeConfig, RequestContext } from '@kubernetes/client-node';
import { Agent, type Dispatcher, fetch } from 'undici';
import { definedFields } from '../contracts/json-record.ts';

export class KubeApiError extends Error {
  readonly statusCode: number;
  /** The Status reason (NotFound, Conflict, AlreadyExists, Expired, ...), when the server sent one. */
  readonly reason: string;
  constructor(statusCode: number, reason: string, message: string) {
    super(message);
    this.name = 'KubeApiError';
    this.statusCode = statusCode;
    this.reason = reason;
  }
}

export function isStatus(error: unknown, code: number): boolean {
  return error instanceof KubeApiError && error.statusCode === code;
}

type Method = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

export interface RequestOptions {
  query?: Record<string, string | number | boolean | undefined>;
  body?: unknown;
  /** PATCH flavour; defaults to a JSON merge patch. */
  contentType?: string;
  /** Defaults to application/json (e.g. metadata only: PARTIAL_METADATA_LIST). */
  accept?: string;
  signal?: AbortSignal;
}

const REQUEST_TIMEOUT_MS = 30_000;
/**
 * Connections to the API server per KubeApi. Each watch holds one for as long as it runs; requests beyond the
 * rest wait in undici's queue instead of opening more (a burst of a thousand sidecars connecting at once is a
 * thousand TokenReviews).
 */
const MAX_CONNECTIONS = 32;

/** Headers and connection pool for one request. */
interface Prepared {
  headers: Record<string, string>;
  dispatcher: Dispatcher | undefined;
}

export class KubeApi {
  readonly kubeConfig: KubeConfig;
  /**
   * One connection pool, reused by every request while the TLS material stays the same. client-node's
   * applySecurityAuthentication builds a new undici Agent, and so a new TLS connection to the API server, for
   * each request (v2.0): at a thousand requests that is a thousand handshakes and sockets left to idle out.
   */
  #pool: { key: string; agent: Agent } | undefined;

  constructor(kubeConfig: KubeConfig) {
    this.kubeConfig = kubeConfig;
  }

  /** Authentication headers (tokens re-read as client-node's authenticators do) and the shared pool for the TLS material. */
  async #prepare(url: URL, method: Method): Promise<Prepared> {
    const options: HttpsRequestOptions = {};
    await this.kubeConfig.applyToHTTPSOptions(options);
    const connect = this.kubeConfig.createDispatcherOptions(this.kubeConfig.getCurrentCluster(), {
      ...definedFields({ ca: options.ca, cert: options.cert, key: options.key, pfx: options.pfx, passphrase: options.passphrase }),
      ...definedFields({ rejectUnauthorized: options.rejectUnauthorized, servername: options.servername }),
    });
    if (connect.type !== 'agent' && connect.type !== 'none') {
      // Through a proxy: client-node's own per-request dispatcher, as before.
      const ctx = new RequestContext(url.toString(), method);
      await this.kubeConfig.applySecurityAuthentication(ctx);
      return { headers: ctx.getHeaders(), dispatcher: ctx.getDispatcher() };
    }
    const headers: Record<string, string> = {};
    for (const [name, value] of Object.entries(options.headers ?? {})) if (value !== undefined) headers[name] = String(value);
    if (options.auth) headers.Authorization = `Basic ${Buffer.from(options.auth).toString('base64')}`;
    return { headers, dispatcher: connect.type === 'agent' ? this.#agent(connect.connect) : undefined };
  }

  #agent(connect: Extract<ReturnType<KubeConfig['createDispatcherOptions']>, { type: 'agent' }>['connect']): Agent {
    const hash = createHash('sha256');
    for (const part of [connect.ca, connect.cert, connect.key, connect.pfx]) {
      for (const piece of [part ?? ''].flat()) hash.update(typeof piece === 'string' || Buffer.isBuffer(piece) ? piece : JSON.stringify(piece));
      hash.update('\0');
    }
    hash.update(`${connect.rejectUnauthorized}|${connect.servername}|${connect.passphrase}`);
    const key = hash.digest('hex');
    if (this.#pool?.key !== key) {
      // Rotated certificates: new connections use them; the old pool's open requests finish before it closes.
      void this.#pool?.agent.close();
      this.#pool = { key, agent: new Agent({ connect: connect as NonNullable<Agent.Options['connect']>, connections: MAX_CONNECTIONS }) };
    }
    return this.#pool.agent;
  }

  /**
   * Stops reusing the pooled connections: after a watch went silent or a request timed out, the connection it
   * used may be half-open, and so may its idle siblings (a NAT or load balancer that dropped them all). The
   * next request opens a fresh one; requests in flight on the old pool finish or time out as they would.
   */
  dropConnections(): void {
    const pool = this.#pool;
    this.#pool = undefined;
    void pool?.agent.close().catch(() => undefined);
  }

  url(path: string, query: RequestOptions['query'] = {}): URL {
    const cluster = this.kubeConfig.getCurrentCluster();
    if (!cluster) throw new Error('kubeconfig has no current cluster');
    const url = new URL(cluster.server.replace(/\/+$/, '') + path);
    for (const [k, v] of Object.entries(query)) if (v !== undefined) url.searchParams.set(k, String(v));
    return url;
  }

  async request<T>(method: Method, path: string, opts: RequestOptions = {}): Promise<T> {
    const url = this.url(path, opts.query);
    const { headers, dispatcher } = await this.#prepare(url, method);
    headers.accept = opts.accept ?? 'application/json';
    let body: string | undefined;
    if (opts.body !== undefined) {
      body = JSON.stringify(opts.body);
      headers['content-type'] = opts.contentType ?? (method === 'PATCH' ? 'application/merge-patch+json' : 'application/json');
    }
    const timeout = AbortSignal.timeout(REQUEST_TIMEOUT_MS);
    const signal = opts.signal ? AbortSignal.any([opts.signal, timeout]) : timeout;
    let text: string;
    let response: Awaited<ReturnType<typeof fetch>>;
    try {
      response = await fetch(url, { method, headers, signal, ...definedFields({ body, dispatcher }) });
      text = await response.text();
    } catch (error) {
      // A request that got no answer in time may have been sent on a half-open connection.
      if (timeout.aborted) this.dropConnections();
      throw error;
    }
    if (response.status >= 200 && response.status < 300) return (text ? JSON.parse(text) : {}) as T;
    let reason = '';
    let message = `${method} ${path}: HTTP ${response.status}`;
    try {
      const status = JSON.parse(text) as { reason?: string; message?: string };
      reason = status.reason ?? '';
      if (status.message) message = `${method} ${path}: ${status.message}`;
    } catch {
      // not a Status object; keep the HTTP code
    }
    throw new KubeApiError(response.status, reason, message);
  }

  /**
   * Opens a streaming GET (a watch). The caller owns the body and aborts through `signal`; a non-2xx answer
   * throws KubeApiError like request() does.
   */
  async stream(path: string, query: RequestOptions['query'], signal: AbortSignal, accept = 'application/json'): Promise<ReadableStream<Uint8Array>> {
    const url = this.url(path, query);
    const { headers, dispatcher } = await this.#prepare(url, 'GET');
    headers.accept = accept;
    const response = await fetch(url, { method: 'GET', headers, signal, ...definedFields({ dispatcher }) });
    if (response.status !== 200 || !response.body) {
      const text = await response.text().catch(() => '');
      let status: { reason?: string; message?: string } = {};
      try {
        status = JSON.parse(text) as typeof status;
      } catch {
        // not a Status object
      }
      throw new KubeApiError(response.status, status.reason ?? '', `watch ${path}: ${status.message ?? `HTTP ${response.status}`}`);
    }
    return response.body as ReadableStream<Uint8Array>;
  }

  get<T>(path: string, opts?: RequestOptions): Promise<T> {
    return this.request<T>('GET', path, opts);
  }

  post<T>(path: string, body: unknown, opts?: RequestOptions): Promise<T> {
    return this.request<T>('POST', path, { ...opts, body });
  }

  put<T>(path: string, body: unknown, opts?: RequestOptions): Promise<T> {
    return this.request<T>('PUT', path, { ...opts, body });
  }

  patch<T>(path: string, body: unknown, opts?: RequestOptions): Promise<T> {
    return this.request<T>('PATCH', path, { ...opts, body });
  }
}

/**
 * Accept headers that ask for objects' metadata only (PartialObjectMetadata): a pod's labels and annotations
 * without its spec and status, a fraction of the bytes to list, watch and keep.
 */
export const PARTIAL_METADATA_LIST = 'application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json';
export const PARTIAL_METADATA = 'application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json';

/** Minimal object metadata the operator reads from any resource. */
export interface ObjectMeta {
  name: string;
  namespace?: string;
  uid?: string;
  resourceVersion?: string;
  generation?: number;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  creationTimestamp?: string;
  deletionTimestamp?: string;
  managedFields?: unknown;
}

export interface KubeObject {
  apiVersion?: string;
  kind?: string;
  metadata: ObjectMeta;
}

export function objectKey(obj: { metadata: { name: string; namespace?: string } }): string {
  return obj.metadata.namespace ? `${obj.metadata.namespace}/${obj.metadata.name}` : obj.metadata.name;
}

export function splitKey(key: string): { namespace: string; name: string } {
  const slash = key.indexOf('/');
  return slash < 0 ? { namespace: '', name: key } : { namespace: key.slice(0, slash), name: key.slice(slash + 1) };
}
