// Many simulated sidecars in one process, for the control-plane scale benchmark (bench/control-plane-scale.ts)
// and its short correctness version in the cluster tests. Each one speaks the config-push wire protocol as the
// real sidecar does (contracts/push-protocol.ts): its own TLS connection (no shared subchannel), a real
// projected service-account token bound to a real Pod, Hello, an Ack for every Snapshot, and spend reports
// with the real sidecar's rules (sidecar/src/budgets/cluster-budgets.ts): unsent spend summed per (policy,
// user, period), sealed into numbered reports of at most 200 entries, one report in flight, resent unchanged
// after a reconnect until acknowledged, and reconnects with the sidecar's own jittered backoff. What it keeps
// of the budget state is only what the benchmark measures: the users named `probe-*`, and message counts.

import * as grpc from '@grpc/grpc-js';
import {
  AUTHORIZATION,
  type BudgetStateMessage,
  configPushService,
  MAX_SNAPSHOT_BYTES,
  MAX_SPEND_ENTRIES_PER_REPORT,
  type OperatorMessage,
  type SidecarMessage,
  type SpendEntryMessage,
} from '../../contracts/push-protocol.ts';
import { BUDGET_POLICY } from '../../crds/index.ts';
import type { KubeApi } from '../../kube-client/api-client.ts';
import { DEFAULT_RECONNECT, type ReconnectPolicy, reconnectDelay, streamOutcome } from '../../sidecar/src/config/push-client.ts';

export interface FleetPod {
  namespace: string;
  name: string;
  uid: string;
  /** A projected token (audience tollgate) bound to the pod. */
  token: string;
}

/**
 * Pod `sim-<i>` of the fleet (Pending forever: no kubelet runs it) in `namespace`, whose ServiceAccount `app`
 * exists, labelled by app (10 pods each), with a projected token bound to it.
 */
export async function createFleetPod(api: KubeApi, namespace: string, i: number): Promise<FleetPod> {
  const name = `sim-${i}`;
  const pod = await api.post<{ metadata: { uid: string } }>(`/api/v1/namespaces/${namespace}/pods`, {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, labels: { app: `app-${Math.floor(i / 10)}`, 'tollgate.dev/fleet': 'true' } },
    spec: { serviceAccountName: 'app', containers: [{ name: 'app', image: 'example.invalid/app:1' }] },
  });
  const token = await api.post<{ status: { token: string } }>(`/api/v1/namespaces/${namespace}/serviceaccounts/app/token`, {
    apiVersion: 'authentication.k8s.io/v1',
    kind: 'TokenRequest',
    spec: { audiences: ['tollgate'], expirationSeconds: 24 * 3600, boundObjectRef: { apiVersion: 'v1', kind: 'Pod', name, uid: pod.metadata.uid } },
  });
  return { namespace, name, uid: pod.metadata.uid, token: token.status.token };
}

/** BudgetPolicy `everyone` of the namespace: every user of every pod, `limitUsd` a month. */
export function fleetBudgetPolicyYaml(namespace: string, limitUsd: string): string {
  return `apiVersion: ${BUDGET_POLICY.apiVersion}
kind: ${BUDGET_POLICY.kind}
metadata: { name: everyone, namespace: ${namespace} }
spec:
  users: ["*"]
  limitUsd: "${limitUsd}"
  period: month
  alertThresholds: [100]
`;
}

export interface FleetOptions {
  /** host:port of the operator's push server. */
  address: string;
  /** The operator's CA (PEM). */
  caPem: string;
  reconnect?: ReconnectPolicy;
  /** How often each sidecar may send a report (the real sidecar: 250 ms). */
  reportIntervalMs?: number;
}

const RESEND_AFTER_MS = 10_000;
const CONNECT_TIMEOUT_MS = 20_000;
export const PROBE_PREFIX = 'probe-';

interface Report {
  sequence: number;
  entries: SpendEntryMessage[];
}

/** Probe users: the usage that counts as "seen" for each, and when the report carrying its charge went out. */
export interface ProbeBook {
  targets: Map<string, bigint>;
  sentAt: Map<string, number>;
}

type Stream = grpc.ClientDuplexStream<SidecarMessage, OperatorMessage>;

/** One simulated sidecar: a push stream, its config acks, and a spend outbox kept in memory. */
export class SimulatedSidecar {
  readonly pod: FleetPod;
  /** When each snapshot version was first acknowledged (ms since the epoch). */
  readonly acked = new Map<string, number>();
  /** Streams opened so far. */
  streams = 0;
  /** When the current stream delivered its first snapshot; 0 while none has. */
  deliveredAt = 0;
  /** Failed streams (refused, reset, unauthenticated), by gRPC status name. */
  readonly failures = new Map<string, number>();
  /** Probe user → when its usage first reached its target. */
  readonly probeSeen = new Map<string, number>();
  budgetMessages = 0;
  usageEntries = 0;
  reportsSent = 0;
  /** Everything charged, and the part the operator acknowledged, in ledger units. */
  charged = 0n;
  acknowledged = 0n;
  readonly #opts: FleetOptions;
  readonly #probes: ProbeBook;
  #client: grpc.Client | undefined;
  #stream: Stream | undefined;
  #attached = false;
  #stopped = false;
  #failuresInRow = 0;
  #retry: NodeJS.Timeout | undefined;
  /** Unsent spend per policy\0user\0period. */
  #unsent = new Map<string, bigint>();
  #sealed: Report[] = [];
  #nextSequence = 1;
  #ackedSequence = 0;
  #includes = 0;
  #inFlight: { sequence: number; sentAt: number } | undefined;
  #timer: NodeJS.Timeout | undefined;

  constructor(pod: FleetPod, opts: FleetOptions, probes: ProbeBook) {
    this.pod = pod;
    this.#opts = opts;
    this.#probes = probes;
  }

  start(): void {
    this.#connect();
    const interval = this.#opts.reportIntervalMs ?? 250;
    // Spread over the interval, as pods started at different moments are.
    this.#timer = setTimeout(() => {
      this.#timer = setInterval(() => this.tick(), interval);
    }, Math.random() * interval);
  }

  stop(): void {
    this.#stopped = true;
    clearTimeout(this.#retry);
    clearTimeout(this.#timer);
    clearInterval(this.#timer);
    this.#stream?.cancel();
    this.#client?.close();
  }

  get connected(): boolean {
    return this.deliveredAt > 0;
  }

  /** Spend that is not acknowledged yet (sealed or not). */
  get outstanding(): bigint {
    return this.charged - this.acknowledged;
  }

  /** One finished call's cost, as the sidecar's outbox adds it. */
  charge(policy: string, userId: string, periodStart: string, units: bigint): void {
    const key = `${policy}\0${userId}\0${periodStart}`;
    this.#unsent.set(key, (this.#unsent.get(key) ?? 0n) + units);
    this.charged += units;
  }

  /** Seals and sends a report when none is in flight (or the one in flight waited too long). */
  tick(): number | undefined {
    if (!this.#attached || !this.#stream) return undefined;
    const now = Date.now();
    if (this.#inFlight && now - this.#inFlight.sentAt < RESEND_AFTER_MS) return undefined;
    const report = this.#sealed.find((r) => r.sequence > this.#includes) ?? this.#seal();
    if (!report) return undefined;
    this.#inFlight = { sequence: report.sequence, sentAt: now };
    this.#stream.write({ spendReport: { sequence: String(report.sequence), entries: report.entries } });
    this.reportsSent += 1;
    for (const e of report.entries) if (e.userId.startsWith(PROBE_PREFIX) && !this.#probes.sentAt.has(e.userId)) this.#probes.sentAt.set(e.userId, now);
    return now;
  }

  #seal(): Report | undefined {
    if (this.#unsent.size === 0) return undefined;
    const entries: SpendEntryMessage[] = [];
    for (const [key, amount] of this.#unsent) {
      if (entries.length >= MAX_SPEND_ENTRIES_PER_REPORT) break;
      const [policy, userId, periodStart] = key.split('\0') as [string, string, string];
      entries.push({ policy, userId, periodStart, amount: amount.toString(), calls: 1 });
      this.#unsent.delete(key);
    }
    const report = { sequence: this.#nextSequence++, entries };
    this.#sealed.push(report);
    return report;
  }

  #connect(): void {
    if (this.#stopped) return;
    const Service = configPushService();
    const client = new Service(this.#opts.address, grpc.credentials.createSsl(Buffer.from(this.#opts.caPem)), {
      'grpc.max_receive_message_length': MAX_SNAPSHOT_BYTES,
      'grpc.keepalive_time_ms': 30_000,
      'grpc.keepalive_timeout_ms': 10_000,
      // A connection of its own, as every pod has: no subchannel shared with the other simulated sidecars.
      'grpc.use_local_subchannel_pool': 1,
    });
    this.#client = client;
    client.waitForReady(Date.now() + CONNECT_TIMEOUT_MS, (error) => {
      if (this.#stopped) return;
      if (error) return this.#ended(client, grpc.status.DEADLINE_EXCEEDED, false);
      this.#open(client);
    });
  }

  #open(client: grpc.Client): void {
    const metadata = new grpc.Metadata();
    metadata.set(AUTHORIZATION, `Bearer ${this.pod.token}`);
    const call = (client as unknown as { stream(md: grpc.Metadata): Stream }).stream(metadata);
    this.#stream = call;
    this.streams += 1;
    let delivered = false;
    call.on('data', (message: OperatorMessage) => {
      if (!this.#attached) {
        this.#attached = true;
        this.#inFlight = undefined;
        this.tick();
      }
      if (message.snapshot) {
        if (!delivered) {
          delivered = true;
          this.deliveredAt = Date.now();
        }
        if (!this.acked.has(message.snapshot.version)) this.acked.set(message.snapshot.version, Date.now());
        call.write({ ack: { version: message.snapshot.version } });
      } else if (message.budgetState) this.#budgetState(message.budgetState);
      else if (message.spendAck) this.#spendAck(Number(message.spendAck.sequence));
    });
    call.on('error', () => undefined);
    call.on('status', (status: grpc.StatusObject) => this.#ended(client, status.code, delivered));
    call.write({ hello: { podName: this.pod.name, podNamespace: this.pod.namespace, currentVersion: '', sidecarVersion: 'simulated' } });
  }

  #ended(client: grpc.Client, code: grpc.status, delivered: boolean): void {
    this.#stream = undefined;
    this.#attached = false;
    this.#includes = 0;
    this.#inFlight = undefined;
    this.deliveredAt = 0;
    client.close();
    if (this.#stopped) return;
    const name = grpc.status[code] ?? String(code);
    if (code !== grpc.status.OK) this.failures.set(name, (this.failures.get(name) ?? 0) + 1);
    const outcome = streamOutcome(code, delivered);
    this.#failuresInRow = outcome === 'delivered' ? 1 : this.#failuresInRow + 1;
    this.#retry = setTimeout(() => this.#connect(), reconnectDelay(this.#opts.reconnect ?? DEFAULT_RECONNECT, this.#failuresInRow, outcome));
  }

  #spendAck(sequence: number): void {
    if (!Number.isSafeInteger(sequence) || sequence <= this.#ackedSequence) return;
    this.#ackedSequence = sequence;
    while (this.#sealed[0] && this.#sealed[0].sequence <= sequence) {
      for (const e of this.#sealed.shift()!.entries) this.acknowledged += BigInt(e.amount);
    }
    if (this.#inFlight && sequence >= this.#inFlight.sequence) this.#inFlight = undefined;
    this.#includes = Math.max(this.#includes, sequence);
    this.tick();
  }

  #budgetState(state: BudgetStateMessage): void {
    this.budgetMessages += 1;
    const now = Date.now();
    for (const u of state.usage ?? []) {
      this.usageEntries += 1;
      if (!u.userId.startsWith(PROBE_PREFIX) || this.probeSeen.has(u.userId)) continue;
      const target = this.#probes.targets.get(u.userId);
      if (target !== undefined && BigInt(u.spent) >= target) this.probeSeen.set(u.userId, now);
    }
    const includes = Number(state.includesSequence ?? 0);
    if (includes > this.#includes) {
      this.#includes = includes;
      if (this.#inFlight && includes >= this.#inFlight.sequence) {
        this.#inFlight = undefined;
        this.tick();
      }
    }
  }
}

/** What the spend load charges: each sidecar serves the users of its app (a group of `replicas` sidecars). */
export interface SpendLoad {
  policy: string;
  /** Distinct users over the whole fleet (the benchmark: 10,000). */
  users: number;
  /** Sidecars per app: every user is served by this many. */
  replicas: number;
  /** This process's sidecars are numbered from here within the whole fleet, of this many. */
  firstIndex: number;
  fleetSize: number;
  /** Users charged per sidecar per report interval. */
  usersPerTick: number;
  /** Ledger units per charge. */
  units: bigint;
}

/** The simulated sidecars of one process. */
export class SidecarFleet {
  readonly sidecars: SimulatedSidecar[] = [];
  readonly probes: ProbeBook = { targets: new Map(), sentAt: new Map() };
  readonly #opts: FleetOptions;
  #load: NodeJS.Timeout | undefined;

  constructor(opts: FleetOptions) {
    this.#opts = opts;
  }

  add(pods: FleetPod[]): void {
    for (const pod of pods) {
      const sidecar = new SimulatedSidecar(pod, this.#opts, this.probes);
      this.sidecars.push(sidecar);
      sidecar.start();
    }
  }

  /** Starts charging every sidecar's app users each interval (the reports then go out on the sidecars' own ticks). */
  startSpend(load: SpendLoad, periodStart: string): void {
    this.stopSpend();
    const apps = Math.max(1, Math.floor(load.fleetSize / load.replicas));
    const usersPerApp = Math.max(1, Math.ceil(load.users / apps));
    this.#load = setInterval(() => {
      this.sidecars.forEach((sidecar, i) => {
        const app = Math.floor((load.firstIndex + i) / load.replicas) % apps;
        for (let k = 0; k < load.usersPerTick; k++) {
          const user = app * usersPerApp + Math.floor(Math.random() * usersPerApp);
          if (user < load.users) sidecar.charge(load.policy, `user-${user}`, periodStart, load.units);
        }
      });
    }, this.#opts.reportIntervalMs ?? 250);
  }

  stopSpend(): void {
    clearInterval(this.#load);
    this.#load = undefined;
  }

  /** Expects a probe user's usage to reach `units` (the fleet that charges it, and every other, must know). */
  expectProbe(user: string, units: bigint): void {
    this.probes.targets.set(user, units);
  }

  /** Charges a probe user through one sidecar; its report goes out at that sidecar's next chance (probes.sentAt). */
  probe(index: number, charge: { policy: string; user: string; periodStart: string; units: bigint }): void {
    this.expectProbe(charge.user, charge.units);
    const sidecar = this.sidecars[index];
    if (!sidecar) throw new Error(`no simulated sidecar ${index} in this fleet`);
    sidecar.charge(charge.policy, charge.user, charge.periodStart, charge.units);
    sidecar.tick();
  }

  stop(): void {
    this.stopSpend();
    for (const s of this.sidecars) s.stop();
  }
}
