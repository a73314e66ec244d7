// The admission app through fastify's inject(): the AdmissionReview wire shape in and out. The namespace
// lookup is a plain function here; the real API server path is covered by test/cluster/webhook.test.ts.

import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { AdmissionUnavailableError } from './admission/pod-admission.ts';
import { buildWebhookApp } from './app.ts';
import { TEST_DEFAULTS } from '../testdata/sidecar-defaults.ts';
import { X509Certificate } from 'node:crypto';
import { sampleValue } from '../../test/support/prometheus-text.ts';
import { WebhookMetrics } from './metrics/webhook-metrics.ts';
import { createCertificateAuthority } from '../../contracts/pki.ts';

function app(opts: { labels?: Record<string, string>; failLookup?: boolean; notReady?: () => string[] } = {}) {
  return buildWebhookApp({
    logger: pino({ level: 'silent' }),
    ...(opts.notReady ? { notReady: opts.notReady } : {}),
    admission: {
      logger: pino({ level: 'silent' }),
      ownNamespace: 'tollgate-system',
      defaults: () => TEST_DEFAULTS,
      operatorCaPem: () => '-----BEGIN CERTIFICATE-----\nX\n-----END CERTIFICATE-----\n',
      nativeSidecarSupported: () => true,
      namespaceLabels: async () => {
        if (opts.failLookup) throw new Error('connection refused');
        return opts.labels ?? {};
      },
    },
  });
}

const review = (object: unknown, extra: object = {}) => ({
  apiVersion: 'admission.k8s.io/v1',
  kind: 'AdmissionReview',
  request: {
    uid: 'a1b2',
    kind: { group: '', version: 'v1', kind: 'Pod' },
    resource: { group: '', version: 'v1', resource: 'pods' },
    namespace: 'shop',
    operation: 'CREATE',
    object,
    ...extra,
  },
});

describe('POST /mutate', () => {
  it('answers with a base64 JSONPatch for an opted-in pod', async () => {
    const res = await app().inject({
      method: 'POST',
      url: '/mutate',
      payload: review({ metadata: { annotations: { 'tollgate.dev/inject': 'true' } }, spec: { containers: [{ name: 'a' }] } }),
    });
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(body).toMatchObject({ apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', response: { uid: 'a1b2', allowed: true, patchType: 'JSONPatch' } });
    const patch = JSON.parse(Buffer.from(body.response.patch, 'base64').toString()) as Array<{ path: string }>;
    expect(patch[0]!.path).toBe('/spec/initContainers');
  });

  it('refuses a bad override with status 400 and the annotation in the message', async () => {
    const res = await app({ labels: { 'tollgate.dev/injection': 'enabled' } }).inject({
      method: 'POST',
      url: '/mutate',
      payload: review({ metadata: { annotations: { 'tollgate.dev/sidecar-port': 'http' } }, spec: { containers: [{ name: 'a' }] } }),
    });
    expect(res.json().response).toMatchObject({ uid: 'a1b2', allowed: false, status: { code: 400 } });
    expect(res.json().response.status.message).toContain('tollgate.dev/sidecar-port');
  });

  it('allows other operations untouched', async () => {
    const res = await app().inject({ method: 'POST', url: '/mutate', payload: review({ spec: {} }, { operation: 'UPDATE' }) });
    expect(res.json().response).toEqual({ uid: 'a1b2', allowed: true });
  });

  it('answers 500 when it cannot judge, so the failurePolicy decides', async () => {
    const res = await app({ failLookup: true }).inject({ method: 'POST', url: '/mutate', payload: review({ spec: { containers: [{ name: 'a' }] } }) });
    expect(res.statusCode).toBe(500);
    expect(res.json().error).toContain('cannot read namespace shop');
  });

  it('rejects a body that is not an AdmissionReview', async () => {
    const res = await app().inject({ method: 'POST', url: '/mutate', payload: { hello: 'world' } });
    expect(res.statusCode).toBe(400);
  });

  it('refuses a request from a web page: only the API server calls this port', async () => {
    const pod = review({ metadata: { annotations: { 'tollgate.dev/inject': 'true' } }, spec: { containers: [{ name: 'a' }] } });
    const fromPage = await app().inject({ method: 'POST', url: '/mutate', payload: pod, headers: { origin: 'http://evil.example' } });
    expect(fromPage.statusCode).toBe(403);
    expect(fromPage.json()).toMatchObject({ error: { code: 'origin_not_allowed' } });
    const crossSite = await app().inject({ method: 'GET', url: '/healthz', headers: { 'sec-fetch-site': 'cross-site' } });
    expect(crossSite.statusCode).toBe(403);
  });

  it('exports an error type the server maps to 500', () => {
    expect(new AdmissionUnavailableError('x').name).toBe('AdmissionUnavailableError');
  });
});

describe('GET /readyz', () => {
  it('answers 503 naming what is missing, then 200 once nothing is', async () => {
    let waiting = ["the operator's CA (/etc/tollgate/operator-ca/ca.crt): sidecars cannot be injected without it"];
    const webhook = app({ notReady: () => waiting });
    const before = await webhook.inject({ method: 'GET', url: '/readyz' });
    expect(before.statusCode).toBe(503);
    expect(before.json()).toEqual({ status: 'not ready', waiting });
    waiting = [];
    const after = await webhook.inject({ method: 'GET', url: '/readyz' });
    expect(after.statusCode).toBe(200);
    // Liveness is not readiness: /healthz answered all along.
    expect((await webhook.inject({ method: 'GET', url: '/healthz' })).statusCode).toBe(200);
  });
});

describe('GET /metrics', () => {
  it('counts each admission by outcome and skip reason, and shows when the certificates expire', async () => {
    const metrics = new WebhookMetrics({ defaultMetrics: false });
    const { certPem } = await createCertificateAuthority({ commonName: 'serving', validityHours: 48 });
    metrics.watchCertificates({ serving: () => certPem });
    const server = buildWebhookApp({
      logger: pino({ level: 'silent' }),
      metrics: metrics.exposition,
      admission: {
        logger: pino({ level: 'silent' }),
        ownNamespace: 'tollgate-system',
        defaults: () => TEST_DEFAULTS,
        operatorCaPem: () => '-----BEGIN CERTIFICATE-----\nX\n-----END CERTIFICATE-----\n',
        nativeSidecarSupported: () => true,
        namespaceLabels: async (ns) => {
          if (ns === 'broken') throw new Error('connection refused');
          return {};
        },
        metrics,
      },
    });
    const pod = (annotations: Record<string, string>) => ({ metadata: { annotations }, spec: { containers: [{ name: 'a' }] } });
    await server.inject({ method: 'POST', url: '/mutate', payload: review(pod({ 'tollgate.dev/inject': 'true' })) });
    await server.inject({ method: 'POST', url: '/mutate', payload: review(pod({ 'tollgate.dev/inject': 'true' })) });
    await server.inject({ method: 'POST', url: '/mutate', payload: review(pod({})) });
    await server.inject({ method: 'POST', url: '/mutate', payload: review(pod({ 'tollgate.dev/inject': 'true', 'tollgate.dev/sidecar-port': 'http' })) });
    await server.inject({ method: 'POST', url: '/mutate', payload: review(pod({}), { namespace: 'broken' }) });
    const res = await server.inject({ method: 'GET', url: '/metrics' });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toBe('text/plain; version=0.0.4; charset=utf-8');
    const body = res.body;
    expect(sampleValue(body, 'tollgate_webhook_admissions_total', { outcome: 'injected' })).toBe(2);
    expect(sampleValue(body, 'tollgate_webhook_admissions_total', { outcome: 'skipped', reason: 'NotOptedIn' })).toBe(1);
    expect(sampleValue(body, 'tollgate_webhook_admissions_total', { outcome: 'skipped', reason: 'HostNetwork' })).toBe(0);
    expect(sampleValue(body, 'tollgate_webhook_admissions_total', { outcome: 'refused' })).toBe(1);
    expect(sampleValue(body, 'tollgate_webhook_admissions_total', { outcome: 'error' })).toBe(1);
    expect(sampleValue(body, 'tollgate_webhook_certificate_expiry_timestamp_seconds', { certificate: 'serving' })).toBe(Date.parse(new X509Certificate(certPem).validTo) / 1000);
    expect(sampleValue(body, 'tollgate_webhook_certificate_expiry_timestamp_seconds', { certificate: 'ca' })).toBeUndefined();

    // While a CA rotates, the bundle holds the old one and the new one: the new one's expiry is reported.
    const oldCa = await createCertificateAuthority({ commonName: 'old', validityHours: 24 });
    const newCa = await createCertificateAuthority({ commonName: 'new', validityHours: 72 });
    metrics.watchCertificates({ serving: () => certPem, ca: () => oldCa.certPem + newCa.certPem });
    const rotated = (await server.inject({ method: 'GET', url: '/metrics' })).body;
    expect(sampleValue(rotated, 'tollgate_webhook_certificate_expiry_timestamp_seconds', { certificate: 'ca' })).toBe(
      Date.parse(new X509Certificate(newCa.certPem).validTo) / 1000,
    );
  });
});
