// The config-push gRPC contract (proto/config_push.proto) as TypeScript: the loaded service definition and
// the message shapes proto-loader produces with the options below. Shared by the operator's server and the
// sidecar's client so both ends read one definition.

import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';

export const PROTO_PATH = fileURLToPath(new URL('../proto/config_push.proto', import.meta.url));

export interface Hello {
  podName?: string;
  podNamespace?: string;
  currentVersion?: string;
  sidecarVersion?: string;
  /** 0 or absent from sidecars released before config revisions (contracts/config-revisions.ts). */
  configRevision?: number;
}

export interface AuditSinkReport {
  name: string;
  kind: string;
  received: number | string;
  delivered: number | string;
  dropped: number | string;
  deadLettered: number | string;
  retried: number | string;
  queueDepth: number;
  failing: boolean;
  lastError: string;
}

export interface AuditReport {
  sinks: AuditSinkReport[];
  streamConnected: boolean;
  streamDisconnects: number | string;
}

/** int64/uint64 fields arrive as decimal strings (longs: String) and may be sent as number or string. */
export type Int64 = number | string;

export interface SpendEntryMessage {
  policy: string;
  userId: string;
  periodStart: string;
  amount: Int64;
  calls: number;
}

export interface SpendReportMessage {
  sequence: Int64;
  entries: SpendEntryMessage[];
}

export interface BudgetUsageMessage {
  policy: string;
  userId: string;
  periodStart: string;
  spent: Int64;
  limitUsed: Int64;
  alerted: number;
  grants: { id: string; used: Int64 }[];
}

export interface BudgetStateMessage {
  replace: boolean;
  policiesJson: string;
  policiesChanged: boolean;
  usage: BudgetUsageMessage[];
  includesSequence: Int64;
  defaultUser: string;
}

/** A target's state as a sidecar sees it (sidecar/src/fallback/target-health.ts), best first. */
export const REPORTED_TARGET_STATES = ['healthy', 'cooling_down', 'circuit_open'] as const;
export type ReportedTargetState = (typeof REPORTED_TARGET_STATES)[number];

export interface AliasHealthMessage {
  alias: string;
  targets: { route: string; model: string; state: ReportedTargetState }[];
  /** Unix ms of the sidecar's clock; 0 (or '0', as int64 arrives) while the alias is served by its first priority. */
  degradedSinceUnixMs: Int64;
}

export interface AliasHealthReportMessage {
  aliases: AliasHealthMessage[];
}

/** One process's connects to a provider around the sidecar (proto BypassEntry, ADR 1605). */
export interface BypassEntryMessage {
  provider: string;
  pid: number;
  binary: string;
  container: string;
  /** host:port as seen ([v6]:port). */
  destination: string;
  connects: number;
  firstSeenUnixMs: Int64;
  lastSeenUnixMs: Int64;
}

export interface BypassReportMessage {
  entries: BypassEntryMessage[];
}

/**
 * What one bypass report may carry (ADR 1605): a sidecar sends at most this many entries, each string cut to its
 * bound; the operator refuses a report beyond them whole. A path may be PATH_MAX (4096) long; an Event's note
 * holds 1024 characters, so a longer binary would not show anyway.
 */
export const BYPASS_REPORT_LIMITS = { entries: 64, binary: 512, container: 63, provider: 63, destination: 64 } as const;

export interface SidecarMessage {
  hello?: Hello;
  ack?: { version: string };
  nack?: { version: string; reason: string };
  auditReport?: AuditReport;
  spendReport?: SpendReportMessage;
  aliasHealthReport?: AliasHealthReportMessage;
  bypassReport?: BypassReportMessage;
  message?: 'hello' | 'ack' | 'nack' | 'auditReport' | 'spendReport' | 'aliasHealthReport' | 'bypassReport';
}

export interface SnapshotMessage {
  version: string;
  configJson: string;
  credentials: Record<string, Buffer>;
  source: string;
}

export interface OperatorMessage {
  snapshot?: SnapshotMessage;
  budgetState?: BudgetStateMessage;
  spendAck?: { sequence: Int64 };
  message?: 'snapshot' | 'budgetState' | 'spendAck';
}

/**
 * Bytes of an alias health report, as JSON (its protobuf is smaller): far below the operator's 256 KiB receive
 * limit, which ends a stream that exceeds it. A config of the largest size (256 aliases of 16 targets) would not
 * fit; a sidecar reports the aliases that do, and the operator shows the others as unknown.
 */
export const MAX_ALIAS_REPORT_BYTES = 96 * 1024;

/** Spend entries per report: a report stays far below the operator's 64 KiB receive limit. */
export const MAX_SPEND_ENTRIES_PER_REPORT = 200;
/** Usage entries per BudgetState message: a full state of a large policy is sent in several. */
export const MAX_USAGE_PER_MESSAGE = 5_000;

let cached: grpc.ServiceClientConstructor | undefined;

/** The ConfigPush service (client constructor; `.service` is the definition servers register). */
export function configPushService(): grpc.ServiceClientConstructor {
  if (cached) return cached;
  const definition = protoLoader.loadSync(PROTO_PATH, {
    keepCase: false,
    longs: String,
    enums: String,
    defaults: true,
    oneofs: true,
  });
  const pkg = grpc.loadPackageDefinition(definition) as unknown as {
    tollgate: { config: { v1: { ConfigPush: grpc.ServiceClientConstructor } } };
  };
  cached = pkg.tollgate.config.v1.ConfigPush;
  return cached;
}

/** Metadata header carrying the sidecar's projected service-account token. */
export const AUTHORIZATION = 'authorization';
/** Message-size bound for snapshots (a config with a thousand prices is far below it). */
export const MAX_SNAPSHOT_BYTES = 4 * 1024 * 1024;
