// AWS Signature Version 4 for Bedrock (signing name `bedrock`) with credentials from the AWS SDK's default
// chain: environment keys, web identity token file (IRSA), container credentials (ECS, EKS Pod Identity),
// shared config, instance metadata. The chain reads its variables from process.env itself.

import type { defaultProvider } from '@aws-sdk/credential-provider-node';
import type { SignatureV4 } from '@smithy/signature-v4';
import { readFile } from 'node:fs/promises';
import type { Logger } from 'pino';
import type { UpstreamConfig } from '../../../contracts/runtime-config.ts';
import { ProxyError } from '../errors.ts';
import { CredentialError } from './credential-error.ts';
import type { CredentialProvider, OutgoingRequest } from './credential-provider.ts';
import { summarizeError } from './error-summary.ts';
import { setHeader } from './header-record.ts';
import { RefreshingCache } from './refreshing-cache.ts';
import { Sha256Hash } from './sha256-hash.ts';

export const BEDROCK_SIGNING_NAME = 'bedrock';

/** The SDK treats credentials as expired 5 minutes early; refreshing at the same point keeps both in step. */
const REFRESH_MARGIN_MS = 5 * 60_000;

type AwsCredentials = Awaited<ReturnType<ReturnType<typeof defaultProvider>>>;
type CredentialSource = (options?: { forceRefresh?: boolean }) => Promise<AwsCredentials>;

/** Headers a caller's own AWS client may have set; the proxy's signature replaces them all. */
const SIGNING_HEADERS = ['authorization', 'x-amz-date', 'x-amz-security-token', 'x-amz-content-sha256'];

/**
 * What the proxy's AWS identity signs: the Bedrock runtime's model invocations, the calls it meters, and
 * CountTokens, which Bedrock does not bill (ADR 0912). Its IAM role may reach far more (IAM, STS, S3, Bedrock's
 * control plane); a path outside this list is never signed, whatever the route (ADR 1007). The signing service
 * (`bedrock`) keeps other services from accepting the signature; the path keeps it to these operations within
 * Bedrock. A base URL's own path prefix (a gateway or private endpoint) may come before it.
 */
export const BEDROCK_SIGNED_PATH = /^\/model\/[^/]+\/(invoke|invoke-with-response-stream|converse|converse-stream|count-tokens)$/;
const SIGNABLE_PATH = /\/model\/[^/]+\/(invoke|invoke-with-response-stream|converse|converse-stream|count-tokens)$/;

const AWS_ENDPOINT_REGION = /^bedrock-runtime(?:-fips)?\.([a-z0-9-]+)\.amazonaws\.com$/;

/**
 * Region to sign for: the upstream's `region` setting, else the region in a real Bedrock endpoint host,
 * else AWS_REGION / AWS_DEFAULT_REGION.
 */
export function resolveAwsRegion(upstream: UpstreamConfig | undefined, env: NodeJS.ProcessEnv): string | undefined {
  if (upstream?.region) return upstream.region;
  if (upstream?.baseUrl) {
    try {
      const match = AWS_ENDPOINT_REGION.exec(new URL(upstream.baseUrl).hostname);
      if (match?.[1]) return match[1];
    } catch {
      // An unparsable base URL is reported by whoever builds the upstream request.
    }
  }
  return env.AWS_REGION || env.AWS_DEFAULT_REGION || undefined;
}

/**
 * The path as AWS SDKs send it: every segment percent-encoded except unreserved characters, so a model id's
 * `:` travels as `%3A`. SigV4 then encodes the canonical URI once more (`%253A`) for every service but S3.
 * The one encoder of an AWS path: the Bedrock route plans with it, the signer re-applies it (a no-op on a
 * planned path). A segment that is not valid percent-encoding is the caller's error, refused.
 */
export function encodeAwsPath(pathname: string): string {
  return pathname
    .split('/')
    .map((segment) => encodeRfc3986(safeDecode(segment)))
    .join('/');
}

function safeDecode(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    throw new ProxyError('invalid_request', `path segment ${JSON.stringify(segment)} is not valid percent-encoding`);
  }
}

function encodeRfc3986(value: string): string {
  return encodeURIComponent(value).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
}

function queryRecord(params: URLSearchParams): Record<string, string | string[]> {
  const query: Record<string, string | string[]> = {};
  for (const [name, value] of params) {
    const existing = query[name];
    if (existing === undefined) query[name] = value;
    else if (Array.isArray(existing)) existing.push(value);
    else query[name] = [existing, value];
  }
  return query;
}

/**
 * A key pair kept in files (a Secret pushed by the operator). Static keys never expire, but the Secret can be
 * rotated in place: the pair is reported as expiring after a quarter of an hour so the cache re-reads the
 * files every ten minutes (it refreshes five minutes early) without a watcher.
 */
const STATIC_KEY_REREAD_MS = 15 * 60_000;

export function staticAwsCredentialsFromFiles(accessKeyIdFile: string, secretAccessKeyFile: string, sessionTokenFile?: string): CredentialSource {
  return async () => {
    const [accessKeyId, secretAccessKey, sessionToken] = await Promise.all([
      readFile(accessKeyIdFile, 'utf8'),
      readFile(secretAccessKeyFile, 'utf8'),
      sessionTokenFile ? readFile(sessionTokenFile, 'utf8') : Promise.resolve(undefined),
    ]);
    return {
      accessKeyId: accessKeyId.trim(),
      secretAccessKey: secretAccessKey.trim(),
      ...(sessionToken?.trim() ? { sessionToken: sessionToken.trim() } : {}),
      expiration: new Date(Date.now() + STATIC_KEY_REREAD_MS),
    };
  };
}

export interface AwsSigV4Options {
  logger: Logger;
  /** Read on every call, so a live config update of the region takes effect. */
  upstream: () => UpstreamConfig | undefined;
  env: NodeJS.ProcessEnv;
  /** The credential chain; the SDK's default chain unless given. */
  credentials?: CredentialSource;
  /** The credential's id in errors and metrics; default aws-sigv4 (the built-in one). */
  id?: string;
  /** The signing name; default bedrock. */
  service?: string;
  /** Where a missing region is set, for the message. */
  regionSetting?: string;
}

export function createAwsSigV4Provider(options: AwsSigV4Options): CredentialProvider {
  const { logger, env } = options;
  const id = options.id ?? 'aws-sigv4';
  // The AWS SDK is loaded on the first Bedrock call: a proxy that never uses gamma-cloudb never pays its memory.
  let chain: Promise<CredentialSource> | null = null;
  const source: CredentialSource =
    options.credentials ??
    (async (opts) => {
      chain ??= import('@aws-sdk/credential-provider-node').then((sdk) => sdk.defaultProvider());
      return (await chain)(opts);
    });
  let signerClass: Promise<typeof SignatureV4> | null = null;

  const cache = new RefreshingCache<AwsCredentials>({
    refreshMarginMs: REFRESH_MARGIN_MS,
    // forceRefresh bypasses the chain's own memo, which would hand back the expiring credentials.
    fetch: async () => {
      const credentials = await source({ forceRefresh: true });
      return { value: credentials, expiresAt: credentials.expiration?.getTime() };
    },
    onStaleServed: (error) => {
      logger.warn({ err: summarizeError(error) }, 'failed to refresh AWS credentials; using the current ones until they expire');
    },
  });

  const signers = new Map<string, SignatureV4>();
  async function signerFor(region: string): Promise<SignatureV4> {
    let signer = signers.get(region);
    if (!signer) {
      const Signer = await (signerClass ??= import('@smithy/signature-v4').then((m) => m.SignatureV4));
      signer = new Signer({
        service: options.service ?? BEDROCK_SIGNING_NAME,
        region,
        credentials: () => cache.get(),
        sha256: Sha256Hash,
        uriEscapePath: true,
        applyChecksum: true,
      });
      signers.set(region, signer);
    }
    return signer;
  }

  return {
    kind: id,
    async apply(req: OutgoingRequest): Promise<void> {
      const region = resolveAwsRegion(options.upstream(), env);
      if (!region) {
        throw new CredentialError(id, `no AWS region: set ${options.regionSetting ?? 'upstreams.gamma-cloudb.region'} or AWS_REGION`);
      }
      try {
        await cache.get();
      } catch (error) {
        const summary = summarizeError(error);
        logger.error({ err: summary, credential: id }, 'failed to get AWS credentials');
        throw new CredentialError(id, `failed to get AWS credentials: ${summary.message}`, { cause: error });
      }

      req.url.pathname = encodeAwsPath(req.url.pathname);
      if (req.method.toUpperCase() !== 'POST' || !SIGNABLE_PATH.test(req.url.pathname)) {
        throw new ProxyError('unmetered_endpoint', `${req.method.toUpperCase()} ${req.url.pathname} is not a Bedrock model invocation or token count: the proxy signs only those`);
      }
      // Only host and the x-amz-* headers are signed: anything else may legitimately change between here
      // and the wire (hop-by-hop handling, content-length framing) without breaking the signature.
      const signed = await (
        await signerFor(region)
      ).sign({
        method: req.method.toUpperCase(),
        protocol: req.url.protocol,
        hostname: req.url.hostname,
        ...(req.url.port ? { port: Number(req.url.port) } : {}),
        path: req.url.pathname,
        query: queryRecord(req.url.searchParams),
        headers: { host: req.url.host },
        body: req.body ?? undefined,
      });

      for (const name of Object.keys(req.headers)) {
        if (SIGNING_HEADERS.includes(name.toLowerCase())) delete req.headers[name];
      }
      for (const [name, value] of Object.entries(signed.headers)) setHeader(req.headers, name, value);
    },
    problem(): string | null {
      const error = cache.lastError;
      return error === undefined ? null : `failed to get AWS credentials: ${summarizeError(error).message}`;
    },
    close(): void {},
  };
}
