import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../../contracts/config-error.ts';
import { parseRuntimeConfigPatch } from '../../../contracts/config-schema.ts';
import { ConfigStore } from '../config/config-store.ts';
import { parseAuditConfig } from '../../../contracts/audit-config.ts';
import { deadLetterFile, resolveSource } from './audit-runtime.ts';

const minimal = { sinks: [{ name: 'siem', kind: 'jsonl', path: '/var/log/audit.jsonl' }] };

function refusal(input: unknown): string {
  try {
    parseAuditConfig(input);
  } catch (error) {
    if (error instanceof ConfigError) return error.message;
    throw error;
  }
  throw new Error('accepted');
}

describe('audit config', () => {
  it('fills in the documented defaults', () => {
    expect(parseAuditConfig(minimal)).toEqual({
      enabled: true,
      source: {},
      sinks: [{ name: 'siem', kind: 'jsonl', path: '/var/log/audit.jsonl' }],
      queue: { maxEvents: 10_000, maxBytes: 16 * 1024 * 1024, whenFull: 'drop_newest' },
      retry: { maxAttempts: 8, initialBackoffMs: 200, maxBackoffMs: 30_000 },
      deadLetter: { maxBytes: 104_857_600 },
      drainTimeoutMs: 10_000,
    });
  });

  it('refuses bad input naming the field', () => {
    expect(refusal({})).toMatch(/^audit\.sinks is required/);
    expect(refusal({ sinks: [{ name: 'x', kind: 'kafka' }] })).toMatch(/^audit\.sinks\[0\]\.kind must be one of jsonl, grpc, bigquery/);
    expect(refusal({ sinks: [{ name: 'x', kind: 'grpc' }] })).toMatch(/^audit\.sinks\[0\]\.address is required/);
    expect(refusal({ sinks: [{ name: 'x', kind: 'grpc', address: 'collector' }] })).toMatch(/^audit\.sinks\[0\]\.address must be host:port/);
    expect(refusal({ sinks: [{ name: 'x', kind: 'jsonl', path: '/a', address: 'h:1' }] })).toMatch(/^audit\.sinks\[0\]\.address is not a known field/);
    expect(refusal({ sinks: [{ name: 'x', kind: 'bigquery', dataset: 'audit' }] })).toMatch(/^audit\.sinks\[0\]\.table is required/);
    expect(refusal({ ...minimal, sinks: [...minimal.sinks, ...minimal.sinks] })).toMatch(/^audit\.sinks\[1\]\.name repeats "siem"/);
    expect(refusal({ ...minimal, queue: { whenFull: 'block' } })).toMatch(/^audit\.queue\.whenFull must be drop_newest or drop_oldest/);
    expect(refusal({ ...minimal, retry: { initialBackoffMs: 500, maxBackoffMs: 100 } })).toMatch(/^audit\.retry\.maxBackoffMs must not be less/);
    expect(refusal({ ...minimal, source: { address: 'tcp://x' } })).toMatch(/^audit\.source\.address must be unix/);
    expect(refusal({ ...minimal, source: { allow: [{ podRegex: ['('] }] } })).toMatch(/^audit\.source\.allow\[0\]\.podRegex\[0\] is not a valid regular expression/);
  });

  it('bounds each queue by bytes too: queue.maxBytes, validated, kept with the event bound', () => {
    expect(parseAuditConfig({ ...minimal, queue: { maxBytes: 1_048_576, whenFull: 'drop_oldest' } }).queue).toEqual({
      maxEvents: 10_000,
      maxBytes: 1_048_576,
      whenFull: 'drop_oldest',
    });
    expect(refusal({ ...minimal, queue: { maxBytes: 512 } })).toMatch(/^audit\.queue\.maxBytes must be an integer at least 1024 and at most 1099511627776 \(got 512\)/);
    expect(refusal({ ...minimal, queue: { maxBytes: '16Mi' } })).toMatch(/^audit\.queue\.maxBytes must be an integer/);
    expect(refusal({ ...minimal, queue: { maxBytes: 2 ** 41 } })).toMatch(/^audit\.queue\.maxBytes must be an integer/);
  });

  it('is a config section whose later layer replaces the earlier one whole', () => {
    const file = parseRuntimeConfigPatch({ audit: { ...minimal, queue: { maxEvents: 5 } } });
    const store = new ConfigStore(file);
    expect(store.get().audit?.queue.maxEvents).toBe(5);
    store.setLayer('operator', parseRuntimeConfigPatch({ audit: { sinks: [{ name: 'collector', kind: 'grpc', address: 'c:4317' }] } }));
    expect(store.get().audit?.sinks.map((s) => s.name)).toEqual(['collector']);
    expect(store.get().audit?.queue.maxEvents).toBe(10_000);
  });

  it('asks for the own pod only in a pod, the configured filter elsewhere, and picks the agent address', () => {
    const config = parseAuditConfig(minimal);
    expect(resolveSource(config, { podName: 'web-1.x', podNamespace: 'team-a', hostIp: '10.0.0.7' })).toEqual({
      address: '10.0.0.7:54321',
      request: { allow_list: [{ namespace: ['team-a'], pod_regex: ['^web-1\\.x$'] }] },
      sender: 'team-a/web-1.x',
    });
    expect(resolveSource(config, { podName: 'p', podNamespace: 'n', hostSocket: 'unix:///var/run/tetragon/tetragon.sock' }).address).toBe('unix:///var/run/tetragon/tetragon.sock');
    const server = parseAuditConfig({ ...minimal, sender: 'gateway', source: { address: 'unix:///run/t.sock', allow: [{ namespace: ['team-a'], podRegex: ['^web-'] }] } });
    expect(resolveSource(server, {})).toEqual({ address: 'unix:///run/t.sock', request: { allow_list: [{ namespace: ['team-a'], pod_regex: ['^web-'] }] }, sender: 'gateway' });
  });

  it('keeps dead letters in a pod within its small state volume unless the config names a file', () => {
    const config = parseAuditConfig(minimal);
    expect(deadLetterFile(config, { stateDir: '/var/run/tollgate' })).toEqual({ path: '/var/run/tollgate/audit-dead-letter.jsonl', maxBytes: 16 * 1024 * 1024 });
    expect(deadLetterFile(parseAuditConfig({ ...minimal, deadLetter: { path: '/data/dl.jsonl' } }), { stateDir: '/var/run/tollgate' })).toEqual({
      path: '/data/dl.jsonl',
      maxBytes: 104_857_600,
    });
    expect(deadLetterFile(config, {})).toEqual({ path: 'tollgate-audit-dead-letter.jsonl', maxBytes: 104_857_600 });
  });
});
