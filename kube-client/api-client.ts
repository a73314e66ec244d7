// A small JSON client for the Kubernetes API on top of @kubernetes/client-node's KubeConfig (which supplies
// the server URL, TLS and authentication). The generated typed clients cover one call per resource; the
// operator needs the same few verbs on core, custom and coordination resources, and Status errors with
// their code, reason and message kept intact so callers can tell 404, 409 and 410 apart.

import { type KubeConfig, RequestContext } from '@kubernetes/client-node';
import { fetch } from 'undici';
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
  signal?: AbortSignal;
}

const REQUEST_TIMEOUT_MS = 30_000;

export class KubeApi {
  readonly kubeConfig: KubeConfig;

  constructor(kubeConfig: KubeConfig) {
    this.kubeConfig = kubeConfig;
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
    const ctx = new RequestContext(url.toString(), method);
    await this.kubeConfig.applySecurityAuthentication(ctx);
    const headers = ctx.getHeaders() as Record<string, string>;
    headers.accept = 'application/json';
    let body: string | undefined;
    if (opts.body !== undefined) {
      body = JSON.stringify(opts.body);
      headers['content-type'] = opts.contentType ?? (method === 'PATCH' ? 'application/merge-patch+json' : 'application/json');
    }
    const signal = opts.signal ? AbortSignal.any([opts.signal, AbortSignal.timeout(REQUEST_TIMEOUT_MS)]) : AbortSignal.timeout(REQUEST_TIMEOUT_MS);
    const response = await fetch(url, { method, headers, signal, ...definedFields({ body, dispatcher: ctx.getDispatcher() }) });
    const text = await response.text();
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
  async stream(path: string, query: RequestOptions['query'], signal: AbortSignal): Promise<ReadableStream<Uint8Array>> {
    const url = this.url(path, query);
    const ctx = new RequestContext(url.toString(), 'GET');
    await this.kubeConfig.applySecurityAuthentication(ctx);
    const headers = ctx.getHeaders() as Record<string, string>;
    headers.accept = 'application/json';
    const response = await fetch(url, { method: 'GET', headers, signal, ...definedFields({ dispatcher: ctx.getDispatcher() }) });
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
