// The `provenance` section of the runtime config: which process in the pod opened each call's connection, and
// connections from the pod to a provider that went around the sidecar (docs/provenance.md, ADR 1600, ADR 1601).
// One schema node for the config file, the config API and the ProxyConfig CRD (ADR 0602); a later layer replaces
// the whole section.

import { ConfigError } from './config-error.ts';
import type { SchemaNode } from './schema-node.ts';
import { validateSection } from './schema-validate.ts';

export type ProvenanceArguments = 'none' | 'redacted' | 'all';

export interface ProvenanceConfig {
  /** false turns a section from an earlier layer off. */
  enabled: boolean;
  /** The Tetragon agent, `unix:///...` or `host:port`; default the node's. Unused while `audit` is on: its stream serves both. */
  address?: string;
  /** How long a finished span waits for its connection's Tetragon event before it is written `unattributed`. */
  attributionWindowMs: number;
  /** `none`: the binary only; `redacted`: arguments with every match of `redact` replaced; `all`: as the process had them. */
  arguments: ProvenanceArguments;
  /** Regular expressions (case-insensitive) whose matches in an argument are replaced by `[redacted]`. */
  redact: string[];
  /** Also look the connection up in /proc (the pod shares its process namespace). */
  procfs: boolean;
  /** The sidecar's own container, whose connections to providers are the expected ones. */
  sidecarContainer: string;
  bypass: {
    enabled: boolean;
    /** More provider endpoints (`host:port`) besides the routes' upstreams. */
    extraHosts: string[];
    /** How often provider host names are resolved again. */
    resolveIntervalMs: number;
  };
  /** The causal trail: what the caller's process tree did after each answer (docs/provenance.md, ADR 1604). */
  trail: {
    enabled: boolean;
    /** How long after an answer ended an action of the caller's process tree is linked to that call. */
    windowMs: number;
    /** Traces whose trail is kept in memory, the oldest forgotten first. */
    maxTraces: number;
  };
}

export const PROVENANCE_DEFAULTS: Omit<ProvenanceConfig, 'enabled'> = {
  attributionWindowMs: 2_000,
  arguments: 'none',
  // key=value and --flag=value forms of the usual secret names, and bearer tokens.
  redact: ['(api[_-]?key|token|secret|password|passwd|authorization)=\\S+', 'bearer\\s+\\S+', 'sk-[A-Za-z0-9_-]{8,}'],
  procfs: false,
  sidecarContainer: 'tollgate-proxy',
  bypass: { enabled: true, extraHosts: [], resolveIntervalMs: 60_000 },
  trail: { enabled: true, windowMs: 30_000, maxTraces: 1_000 },
};

export const PROVENANCE_SCHEMA: SchemaNode = {
  type: 'object',
  tsType: 'ProvenanceSpec',
  description: 'Which process in the pod made each call (from Tetragon tcp_connect events or /proc), and provider calls that bypass the sidecar (docs/provenance.md).',
  properties: {
    enabled: { type: 'boolean', description: 'false turns it off (default true when the section is present).' },
    address: {
      type: 'string',
      description: "The Tetragon agent (unix:///path or host:port); default the node's. While audit is on, its stream serves both.",
      maxLength: 4096,
      pattern: '^(unix:///\\S+|(\\[[0-9a-fA-F:.]+\\]|[A-Za-z0-9.-]+):\\d{1,5})$',
    },
    attributionWindowMs: { type: 'integer', format: 'int32', description: "How long a finished span waits for its connection's event, milliseconds.", minimum: 0, maximum: 30_000 },
    arguments: { type: 'string', description: 'Process arguments on spans: none (binary only, the default), redacted, or all.', enum: ['none', 'redacted', 'all'] },
    redact: {
      type: 'array',
      description: 'Case-insensitive regular expressions whose matches in an argument are replaced by [redacted] (arguments: redacted).',
      maxItems: 32,
      items: { type: 'string', maxLength: 512 },
    },
    procfs: { type: 'boolean', description: 'Also look connections up in /proc (needs shareProcessNamespace: true).' },
    sidecarContainer: { type: 'string', description: "The sidecar's container name (default tollgate-proxy).", maxLength: 253 },
    bypass: {
      type: 'object',
      tsType: 'ProvenanceBypassSpec',
      description: 'Detection of connections from the pod to provider endpoints that did not come from the sidecar.',
      properties: {
        enabled: { type: 'boolean', description: 'Default true.' },
        extraHosts: { type: 'array', description: 'More provider endpoints, host:port.', maxItems: 64, items: { type: 'string', maxLength: 260, pattern: '^[^\\s:]+:\\d{1,5}$' } },
        resolveIntervalMs: { type: 'integer', format: 'int32', description: 'How often provider host names are resolved again, milliseconds.', minimum: 1_000, maximum: 3_600_000 },
      },
    },
    trail: {
      type: 'object',
      tsType: 'ProvenanceTrailSpec',
      description: "The causal trail: execs, exits, connects and file writes of the caller's process tree after each answer, linked to the call (in memory).",
      properties: {
        enabled: { type: 'boolean', description: 'Default true.' },
        windowMs: {
          type: 'integer',
          format: 'int32',
          description: 'How long after an answer an action is linked to it, milliseconds (default 30000).',
          minimum: 100,
          maximum: 600_000,
        },
        maxTraces: { type: 'integer', format: 'int32', description: 'Traces whose trail is kept, the oldest forgotten first (default 1000).', minimum: 1, maximum: 100_000 },
      },
    },
  },
};

type ProvenancePatch = Partial<Omit<ProvenanceConfig, 'bypass' | 'trail'>> & { bypass?: Partial<ProvenanceConfig['bypass']>; trail?: Partial<ProvenanceConfig['trail']> };

/** The section from file, API or snapshot input, defaults filled in; a bad value throws naming its field. */
export function parseProvenanceConfig(input: unknown, field: string): ProvenanceConfig {
  const v = validateSection<ProvenancePatch>(PROVENANCE_SCHEMA, input, field);
  const redact = v.redact ?? PROVENANCE_DEFAULTS.redact;
  redact.forEach((pattern, i) => {
    try {
      new RegExp(pattern, 'i');
    } catch (error) {
      throw new ConfigError(`${field}.redact[${i}]`, `is not a valid regular expression: ${(error as Error).message}`);
    }
  });
  return {
    enabled: v.enabled ?? true,
    ...(v.address !== undefined ? { address: v.address } : {}),
    attributionWindowMs: v.attributionWindowMs ?? PROVENANCE_DEFAULTS.attributionWindowMs,
    arguments: v.arguments ?? PROVENANCE_DEFAULTS.arguments,
    redact,
    procfs: v.procfs ?? PROVENANCE_DEFAULTS.procfs,
    sidecarContainer: v.sidecarContainer ?? PROVENANCE_DEFAULTS.sidecarContainer,
    bypass: { ...PROVENANCE_DEFAULTS.bypass, ...v.bypass },
    trail: { ...PROVENANCE_DEFAULTS.trail, ...v.trail },
  };
}
