// Verifies an AWS Signature Version 4 the way an AWS service does: rebuild the canonical request from what
// arrived, sign it with the configured secret, compare. Written with node:crypto on purpose, so the proxy's
// signer (@smithy/signature-v4) is checked against an independent implementation.

import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';

export interface SigV4Credentials {
  accessKeyId: string;
  secretAccessKey: string;
  sessionToken?: string;
  region: string;
}

export interface ReceivedRequest {
  method: string;
  /** Path exactly as received, still percent-encoded. */
  path: string;
  /** Query string as received, without `?`. */
  query: string;
  headers: IncomingHttpHeaders;
  body: Buffer;
}

export type SigV4Verdict = { ok: true } | { ok: false; errorType: string; message: string };

const algorithm = 'AWS4-HMAC-SHA256';
const maxSkewMs = 5 * 60 * 1000;
const mismatch =
  'The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method. Consult the service documentation for details.';

export function verifySigV4(req: ReceivedRequest, creds: SigV4Credentials, service: string, now = new Date()): SigV4Verdict {
  const fail = (errorType: string, message: string): SigV4Verdict => ({ ok: false, errorType, message });
  const authorization = single(req.headers.authorization);
  if (authorization === undefined) return fail('MissingAuthenticationTokenException', 'Missing Authentication Token');
  const authorizationFormat = /^AWS4-HMAC-SHA256 Credential=([^,]+), ?SignedHeaders=([^,]+), ?Signature=([0-9a-f]{64})$/;
  const parsed = authorizationFormat.exec(authorization);
  if (!parsed) return fail('IncompleteSignatureException', `Authorization header is not a valid ${algorithm} signature: ${authorization}`);
  const [, credential = '', signedHeaderList = '', signature = ''] = parsed;
  const [accessKeyId, date, region, scopeService, terminator] = credential.split('/');
  if (accessKeyId !== creds.accessKeyId) return fail('UnrecognizedClientException', 'The security token included in the request is invalid.');
  if (region !== creds.region) return fail('InvalidSignatureException', `Credential should be scoped to a valid region, not '${region}'.`);
  if (scopeService !== service || terminator !== 'aws4_request') {
    return fail('InvalidSignatureException', `Credential should be scoped to correct service: '${service}'.`);
  }
  const token = single(req.headers['x-amz-security-token']);
  if (token !== creds.sessionToken) return fail('UnrecognizedClientException', 'The security token included in the request is invalid.');

  const amzDate = single(req.headers['x-amz-date']) ?? '';
  const signedAt = parseAmzDate(amzDate);
  if (signedAt === null || amzDate.slice(0, 8) !== date) {
    return fail('IncompleteSignatureException', `X-Amz-Date '${amzDate}' is missing, malformed or does not match the credential scope date.`);
  }
  if (Math.abs(now.getTime() - signedAt.getTime()) > maxSkewMs) {
    return fail('InvalidSignatureException', `Signature expired: ${amzDate} is now earlier or later than the 5-minute window.`);
  }
  const signedHeaders = signedHeaderList.split(';');
  if (!signedHeaders.includes('host')) return fail('InvalidSignatureException', "'Host' must be a signed header.");
  if (token !== undefined && !signedHeaders.includes('x-amz-security-token')) {
    return fail('InvalidSignatureException', "'X-Amz-Security-Token' must be a signed header.");
  }

  const canonical = canonicalRequest(req, signedHeaders);
  const scope = `${date}/${region}/${service}/aws4_request`;
  const stringToSign = `${algorithm}\n${amzDate}\n${scope}\n${sha256Hex(canonical)}`;
  const expected = signingKey(creds.secretAccessKey, date, region, service).update(stringToSign).digest();
  if (!timingSafeEqual(expected, Buffer.from(signature, 'hex'))) {
    return fail(
      'InvalidSignatureException',
      `${mismatch}\n\nThe Canonical String for this request should have been\n'${canonical}'\n\nThe String-to-Sign should have been\n'${stringToSign}'\n`,
    );
  }
  return { ok: true };
}

/**
 * For every service but S3 the canonical URI is the received path URI-encoded once more, segment by segment:
 * a model id's ':' arrives as %3A and is signed as %253A.
 */
export function canonicalRequest(req: ReceivedRequest, signedHeaders: string[]): string {
  const uri = req.path.split('/').map(awsEncode).join('/') || '/';
  const query = req.query
    .split('&')
    .filter((pair) => pair !== '')
    .map((pair) => {
      const [k = '', v = ''] = pair.split('=');
      return [awsEncode(decodeURIComponent(k)), awsEncode(decodeURIComponent(v))] as const;
    })
    .sort(([ka, va], [kb, vb]) => (ka === kb ? (va < vb ? -1 : 1) : ka < kb ? -1 : 1))
    .map(([k, v]) => `${k}=${v}`)
    .join('&');
  const headers = signedHeaders.map((name) => `${name}:${headerValue(req.headers[name])}\n`).join('');
  return [req.method, uri, query, headers, signedHeaders.join(';'), sha256Hex(req.body)].join('\n');
}

function signingKey(secret: string, date: string, region: string, service: string) {
  const kDate = createHmac('sha256', `AWS4${secret}`).update(date).digest();
  const kRegion = createHmac('sha256', kDate).update(region).digest();
  const kService = createHmac('sha256', kRegion).update(service).digest();
  const kSigning = createHmac('sha256', kService).update('aws4_request').digest();
  return createHmac('sha256', kSigning);
}

function awsEncode(s: string): string {
  return encodeURIComponent(s).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
}

function headerValue(v: string | string[] | undefined): string {
  const joined = Array.isArray(v) ? v.join(',') : (v ?? '');
  return joined.trim().replace(/\s+/g, ' ');
}

function sha256Hex(data: string | Buffer): string {
  return createHash('sha256').update(data).digest('hex');
}

function parseAmzDate(s: string): Date | null {
  const m = /^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/.exec(s);
  if (!m) return null;
  return new Date(Date.UTC(Number(m[1]), Number(m[2]) - 1, Number(m[3]), Number(m[4]), Number(m[5]), Number(m[6])));
}

function single(v: string | string[] | undefined): string | undefined {
  return Array.isArray(v) ? v[0] : v;
}
