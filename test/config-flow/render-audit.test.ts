import { describe, expect, it } from 'vitest';
import { SnapshotCache } from '../../sidecar/src/config/snapshot-cache.ts';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { referencedSecrets, render, resolveCredentials } from '../../operator/src/render.ts';
import { AUDIT_CONDITION, auditVerdict } from '../../operator/src/controller/audit-condition.ts';

const spec = {
  audit: {
    sinks: [
      { name: 'siem', kind: 'jsonl' as const, path: '/var/log/tollgate/audit.jsonl', rotate: { maxBytes: 1_048_576, keep: 2 } },
      {
        name: 'collector',
        kind: 'grpc' as const,
        address: 'audit.security:4317',
        tls: { serverName: 'audit', caCertificate: { secretName: 'audit-tls', key: 'ca.crt' } },
        bearerToken: { secretName: 'audit-token', key: 'token' },
      },
      { name: 'warehouse', kind: 'bigquery' as const, dataset: 'audit', table: 'tetragon_events', credentials: { secretName: 'bq-key', key: 'sa.json' } },
    ],
    retry: { maxAttempts: 4 },
  },
};

describe('ProxyConfig spec.audit', () => {
  it('renders into the runtime audit section with sink secrets as named credentials, never values', () => {
    const rendered = render(spec);
    expect(rendered.patch.audit?.sinks).toEqual([
      { name: 'siem', kind: 'jsonl', path: '/var/log/tollgate/audit.jsonl', rotate: { maxBytes: 1_048_576, keep: 2 } },
      { name: 'collector', kind: 'grpc', address: 'audit.security:4317', tls: { serverName: 'audit' } },
      { name: 'warehouse', kind: 'bigquery', dataset: 'audit', table: 'tetragon_events' },
    ]);
    expect(rendered.patch.audit?.retry.maxAttempts).toBe(4);
    expect(rendered.patch.audit?.source).toEqual({});
    expect(rendered.credentialRefs.map((r) => [r.name, r.field, r.secretName, r.key])).toEqual([
      ['audit.collector.bearerToken', 'audit.sinks[1].bearerToken', 'audit-token', 'token'],
      ['audit.collector.caCertificate', 'audit.sinks[1].tls.caCertificate', 'audit-tls', 'ca.crt'],
      ['audit.warehouse.credentials', 'audit.sinks[2].credentials', 'bq-key', 'sa.json'],
    ]);
    expect(referencedSecrets(spec).sort()).toEqual(['audit-tls', 'audit-token', 'bq-key']);
  });

  it('reaches the sidecar as files its sinks point at', async () => {
    const rendered = render(spec);
    const secrets: Record<string, Record<string, string>> = {
      'audit-token': { token: Buffer.from('s3cret').toString('base64') },
      'audit-tls': { 'ca.crt': Buffer.from('-----BEGIN CERTIFICATE-----').toString('base64') },
      'bq-key': { 'sa.json': Buffer.from('{"type":"service_account"}').toString('base64') },
    };
    const resolved = resolveCredentials(rendered.credentialRefs, (name) => (secrets[name] ? { data: secrets[name] } : undefined));
    if (!resolved.ok) throw new Error(resolved.message);
    const dir = mkdtempSync(join(tmpdir(), 'tollgate-audit-snapshot-'));
    try {
      const cache = new SnapshotCache(dir, pino({ level: 'silent' }));
      const prepared = await cache.prepare({ version: 'v1', source: 'team-a/default', configJson: JSON.stringify(rendered.patch), credentials: resolved.values });
      const [, collector, warehouse] = prepared.patch.audit!.sinks;
      expect(collector).toMatchObject({
        kind: 'grpc',
        bearerTokenFile: join(dir, 'credentials', 'audit-collector-bearerToken'),
        tls: { serverName: 'audit', caFile: join(dir, 'credentials', 'audit-collector-caCertificate') },
      });
      expect(warehouse).toMatchObject({ kind: 'bigquery', credentialsFile: join(dir, 'credentials', 'audit-warehouse-credentials') });
      expect(readFileSync(join(dir, 'credentials', 'audit-collector-bearerToken'), 'utf8')).toBe('s3cret');
      await cache.commit(prepared);
      // a later snapshot without the collector's secrets removes their files
      const next = await cache.prepare({
        version: 'v2',
        source: 'team-a/default',
        configJson: JSON.stringify(render({ audit: { sinks: [spec.audit.sinks[0]!] } }).patch),
        credentials: {},
      });
      await cache.commit(next);
      expect(() => readFileSync(join(dir, 'credentials', 'audit-collector-bearerToken'))).toThrow();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('refuses a sink the sidecar would refuse, naming the field', () => {
    expect(() => render({ audit: { sinks: [{ name: 'x', kind: 'grpc' }] } })).toThrow(/audit\.sinks\[0\]\.address is required/);
  });
});

describe(`the ${AUDIT_CONDITION} condition`, () => {
  const sink = (name: string, failing: boolean, lastError = '') => ({
    name,
    kind: 'grpc',
    received: 10,
    delivered: 10,
    dropped: 0,
    deadLettered: failing ? 2 : 0,
    retried: 0,
    queueDepth: 0,
    failing,
    lastError,
  });
  it('is Unknown before any report, True while every sidecar delivers, False naming the sink and pods otherwise', () => {
    expect(auditVerdict([])).toMatchObject({ status: 'Unknown', reason: 'NoReports' });
    expect(auditVerdict([{ pod: 'a/p1', report: { sinks: [sink('collector', false)], streamConnected: true, streamDisconnects: 0 } }])).toEqual({
      status: 'True',
      reason: 'Delivering',
      message: '1 sidecar(s) delivering to collector',
    });
    const verdict = auditVerdict([
      { pod: 'a/p1', report: { sinks: [sink('collector', true, 'UNAVAILABLE: connection refused'), sink('siem', false)], streamConnected: true, streamDisconnects: 0 } },
      { pod: 'a/p2', report: { sinks: [sink('collector', false)], streamConnected: false, streamDisconnects: 3 } },
    ]);
    expect(verdict).toEqual({
      status: 'False',
      reason: 'SinkFailing',
      message:
        'sink collector: 1 of 2 sidecars dead-lettering or dropping (a/p1), last error: UNAVAILABLE: connection refused; 1 of 2 sidecars not connected to the Tetragon agent',
    });
  });
});
