// `tollgate operator` command line and environment → operator settings, as a pure function so every flag is
// tested without starting anything. Bad input throws UsageError naming the flag.

import { isIP } from 'node:net';
import { parseArgs } from 'node:util';
import type { TlsSource } from './tls/serving-certificate.ts';
import { type BudgetRedisConfig, DEFAULT_REDIS_KEY_PREFIX } from '../../contracts/budget-config.ts';

export const OPERATOR_USAGE = `usage: tollgate operator [options]

Reconciles ProxyConfig resources and pushes their config to Tollgate sidecars over gRPC (TLS).
Only the replica holding the Lease reconciles and serves the push port; the others wait as standbys.

options:
  --kubeconfig PATH        kubeconfig file (default: $KUBECONFIG, else in-cluster service account)
  --namespace NS           namespace of the Lease and the generated TLS Secret
                           (default: $POD_NAMESPACE, else tollgate-system)
  --lease-name NAME        Lease used for leader election (default: tollgate-operator)
  --identity ID            this replica's identity in the Lease (default: $POD_NAME, else hostname-pid)
  --grpc-host HOST         push server address (default: 0.0.0.0)
  --grpc-port PORT         push server port (default: 8443)
  --health-host HOST       address of the /healthz and /readyz listener, served by every replica
                           (default: 0.0.0.0)
  --health-port PORT       its port (default: 8081)
  --tls-cert PATH          serving certificate (PEM); with --tls-key. Without both, the operator
  --tls-key PATH           generates a CA and certificate and keeps them in --tls-secret
  --tls-ca PATH            with --tls-cert: the CA sidecars trust (e.g. cert-manager's ca.crt), published
                           in --ca-config-map
  --tls-secret NAME        Secret for the generated certificate, key and ca.crt (default: tollgate-operator-tls)
  --ca-config-map NAME     ConfigMap (in --namespace) the operator publishes its CA in, for the webhook to
                           give every sidecar (default: tollgate-operator-ca)
  --tls-dns-name NAME      DNS name in the generated certificate, repeatable
                           (default: tollgate-operator.NS.svc and tollgate-operator.NS.svc.cluster.local)
  --tls-ip IP              IP address in the generated certificate, repeatable (default: 127.0.0.1)
  --pod-ip IP              this replica's pod IP (default: $POD_IP). When set, the leader lists it as the
                           only endpoint of --push-service (an EndpointSlice in --namespace); without it
                           no EndpointSlice is written
  --push-service NAME      the selector-less push Service (default: tollgate-operator)
  --owner-deployment NAME  the Deployment this operator runs in (in --namespace): the Lease, the
                           EndpointSlice, the generated TLS Secret and the budget ledger ConfigMaps name it
                           as their owner, so deleting it (helm uninstall) deletes them (default: no owner)
  --watch-namespace NS     watch ProxyConfigs and credential Secrets (labelled tollgate.dev/credentials=true)
                           in this namespace only (default: all)
  --lease-duration SEC     leader election lease duration (default: 15)
  --renew-deadline SEC     leader gives up if it cannot renew for this long (default: 10)
  --retry-period SEC       interval between Lease attempts (default: 2)
  --alias-degraded-after SEC
                           a model alias served below its first priority for longer than this gets an
                           AliasDegraded Warning Event on its ProxyConfig (default: 180)
  --ledger-redis-url URL   budgets.store redis: keep the cluster's budget ledger on this Redis-compatible
                           store (redis:// or rediss://, without a password) instead of ConfigMaps of
                           --namespace; its password, if any, from $TOLLGATE_LEDGER_REDIS_PASSWORD
  --ledger-redis-key-prefix P
                           its key prefix (default: tollgate:budgets)
  --log-level LEVEL        trace, debug, info, warn, error (default: info)
  -h, --help               show this help
`;

export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UsageError';
  }
}

export interface OperatorSettings {
  help: boolean;
  kubeconfig?: string;
  namespace: string;
  leaseName: string;
  identity: string;
  grpcHost: string;
  grpcPort: number;
  healthHost: string;
  healthPort: number;
  tls: TlsSource;
  /** The ConfigMap holding the CA sidecars trust (ADR 0809). */
  caConfigMap: string;
  watchNamespace?: string;
  /** The operator's own Deployment, owner of what it creates (ADR 0807). */
  ownerDeployment?: string;
  /** Present when the leader publishes itself as the push Service's endpoint (docs/decisions/0721). */
  leaderEndpoint?: { service: string; podIP: string };
  leaseDurationMs: number;
  renewDeadlineMs: number;
  retryPeriodMs: number;
  /** A model alias served below its first priority this long is degraded (ADR 0724). */
  aliasDegradedAfterMs: number;
  /** budgets.store redis: where the leader keeps the cluster ledger (ADR 1314). */
  ledgerRedis?: BudgetRedisConfig;
  logLevel: string;
}

const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/;
const LOG_LEVELS = ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'];

function port(value: string, flag: string): number {
  const n = Number(value);
  if (!/^\d+$/.test(value) || n < 0 || n > 65535) throw new UsageError(`${flag} must be a port number 0-65535 (got ${JSON.stringify(value)})`);
  return n;
}

function seconds(value: string | undefined, flag: string, fallback: number): number {
  if (value === undefined) return fallback * 1000;
  const n = Number(value);
  if (!Number.isFinite(n) || n <= 0 || n > 3600) throw new UsageError(`${flag} must be a number of seconds between 0 and 3600 (got ${JSON.stringify(value)})`);
  return Math.round(n * 1000);
}

function namespaceName(value: string, flag: string): string {
  if (!DNS_LABEL.test(value) || value.length > 63) throw new UsageError(`${flag} must be a namespace name (got ${JSON.stringify(value)})`);
  return value;
}

export function parseOperatorArgs(argv: string[], env: Record<string, string | undefined>, hostname: string, pid: number): OperatorSettings {
  let values: OperatorFlags;
  try {
    values = parse(argv).values;
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
  const namespace = namespaceName(values.namespace ?? env.POD_NAMESPACE ?? 'tollgate-system', '--namespace');
  const tls = tlsSource(values, namespace);
  const timings = leaseTimings(values);
  const logLevel = values['log-level'] ?? 'info';
  if (!LOG_LEVELS.includes(logLevel)) throw new UsageError(`--log-level must be one of ${LOG_LEVELS.join(', ')} (got ${JSON.stringify(logLevel)})`);
  const kubeconfig = values.kubeconfig ?? env.KUBECONFIG;
  const podIP = podIpOf(values, env);
  const ownerDeployment = values['owner-deployment'];
  if (ownerDeployment !== undefined && !DNS_SUBDOMAIN.test(ownerDeployment)) {
    throw new UsageError(`--owner-deployment must be a Deployment name (got ${JSON.stringify(ownerDeployment)})`);
  }
  const caConfigMap = values['ca-config-map'] ?? 'tollgate-operator-ca';
  if (!DNS_SUBDOMAIN.test(caConfigMap)) throw new UsageError(`--ca-config-map must be a ConfigMap name (got ${JSON.stringify(caConfigMap)})`);
  const pushService = values['push-service'] ?? 'tollgate-operator';
  if (!DNS_LABEL.test(pushService) || pushService.length > 63) throw new UsageError(`--push-service must be a Service name (got ${JSON.stringify(pushService)})`);
  return {
    help: values.help ?? false,
    ...(kubeconfig ? { kubeconfig } : {}),
    namespace,
    leaseName: values['lease-name'] ?? 'tollgate-operator',
    identity: values.identity ?? env.POD_NAME ?? `${hostname}-${pid}`,
    grpcHost: values['grpc-host'] ?? '0.0.0.0',
    grpcPort: port(values['grpc-port'] ?? '8443', '--grpc-port'),
    healthHost: values['health-host'] ?? '0.0.0.0',
    healthPort: port(values['health-port'] ?? '8081', '--health-port'),
    tls,
    caConfigMap,
    ...(values['watch-namespace'] ? { watchNamespace: namespaceName(values['watch-namespace'], '--watch-namespace') } : {}),
    ...(ownerDeployment ? { ownerDeployment } : {}),
    ...(podIP ? { leaderEndpoint: { service: pushService, podIP } } : {}),
    ...timings,
    aliasDegradedAfterMs: seconds(values['alias-degraded-after'], '--alias-degraded-after', 180),
    ...ledgerRedisOf(values, env),
    logLevel,
  };
}

type OperatorFlags = ReturnType<typeof parse>['values'];

/** The push server's certificate: files, or a self-managed Secret in the operator's namespace. */
function tlsSource(values: OperatorFlags, namespace: string): TlsSource {
  if (!!values['tls-cert'] !== !!values['tls-key']) throw new UsageError('--tls-cert and --tls-key must be given together');
  if (values['tls-ca'] && !values['tls-cert']) throw new UsageError('--tls-ca goes with --tls-cert and --tls-key');
  if (values['tls-cert'] && values['tls-key']) {
    return { kind: 'files', certFile: values['tls-cert'], keyFile: values['tls-key'], ...(values['tls-ca'] ? { caFile: values['tls-ca'] } : {}) };
  }
  return {
    kind: 'secret',
    namespace,
    name: values['tls-secret'] ?? 'tollgate-operator-tls',
    dnsNames: values['tls-dns-name'] ?? [`tollgate-operator.${namespace}.svc`, `tollgate-operator.${namespace}.svc.cluster.local`],
    ipAddresses: values['tls-ip'] ?? ['127.0.0.1'],
  };
}

/** The leader election's timings, each shorter than the one before. */
function leaseTimings(values: OperatorFlags): Pick<OperatorSettings, 'leaseDurationMs' | 'renewDeadlineMs' | 'retryPeriodMs'> {
  const leaseDurationMs = seconds(values['lease-duration'], '--lease-duration', 15);
  const renewDeadlineMs = seconds(values['renew-deadline'], '--renew-deadline', 10);
  const retryPeriodMs = seconds(values['retry-period'], '--retry-period', 2);
  if (renewDeadlineMs >= leaseDurationMs) throw new UsageError('--renew-deadline must be shorter than --lease-duration');
  if (retryPeriodMs >= renewDeadlineMs) throw new UsageError('--retry-period must be shorter than --renew-deadline');
  return { leaseDurationMs, renewDeadlineMs, retryPeriodMs };
}

const LEDGER_REDIS_PASSWORD_ENV = 'TOLLGATE_LEDGER_REDIS_PASSWORD';
const REDIS_KEY_PREFIX = /^[A-Za-z0-9:._-]{1,64}$/;

/** --ledger-redis-*: the store of the cluster ledger, refused when the URL would carry the password. */
function ledgerRedisOf(values: OperatorFlags, env: Record<string, string | undefined>): { ledgerRedis?: BudgetRedisConfig } {
  const url = values['ledger-redis-url'];
  if (url === undefined) {
    if (values['ledger-redis-key-prefix'] !== undefined) throw new UsageError('--ledger-redis-key-prefix goes with --ledger-redis-url');
    return {};
  }
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new UsageError(`--ledger-redis-url must be a URL such as redis://tollgate-redis:6379 (got ${JSON.stringify(url)})`);
  }
  if (parsed.protocol !== 'redis:' && parsed.protocol !== 'rediss:') throw new UsageError(`--ledger-redis-url must start with redis:// or rediss:// (got ${JSON.stringify(url)})`);
  if (parsed.hostname === '') throw new UsageError('--ledger-redis-url must name a host');
  if (parsed.password !== '') throw new UsageError(`--ledger-redis-url must not contain a password: set $${LEDGER_REDIS_PASSWORD_ENV} (from a Secret)`);
  const keyPrefix = values['ledger-redis-key-prefix'] ?? DEFAULT_REDIS_KEY_PREFIX;
  if (!REDIS_KEY_PREFIX.test(keyPrefix))
    throw new UsageError(`--ledger-redis-key-prefix must be 1 to 64 letters, digits, ':', '.', '_' and '-' (got ${JSON.stringify(keyPrefix)})`);
  return { ledgerRedis: { url, keyPrefix, ...(env[LEDGER_REDIS_PASSWORD_ENV] ? { passwordEnv: LEDGER_REDIS_PASSWORD_ENV } : {}) } };
}

/** The pod's own address, which the leader lists as the push Service's endpoint (in a cluster). */
function podIpOf(values: OperatorFlags, env: Record<string, string | undefined>): string | undefined {
  const podIP = values['pod-ip'] ?? (env.POD_IP || undefined);
  if (podIP !== undefined && !isIP(podIP)) throw new UsageError(`--pod-ip must be an IPv4 or IPv6 address (got ${JSON.stringify(podIP)})`);
  // The API server refuses these as endpoint addresses; say so at start rather than in a retry loop.
  if (podIP !== undefined && /^(127\.|0\.0\.0\.0$|::1?$|::ffff:127\.)/i.test(podIP)) {
    throw new UsageError(`--pod-ip must be the pod's routable address, not loopback or unspecified (got ${JSON.stringify(podIP)})`);
  }
  return podIP;
}

function parse(argv: string[]) {
  return parseArgs({
    args: argv,
    strict: true,
    allowPositionals: false,
    options: {
      kubeconfig: { type: 'string' },
      namespace: { type: 'string' },
      'lease-name': { type: 'string' },
      identity: { type: 'string' },
      'grpc-host': { type: 'string' },
      'grpc-port': { type: 'string' },
      'health-host': { type: 'string' },
      'health-port': { type: 'string' },
      'tls-cert': { type: 'string' },
      'tls-key': { type: 'string' },
      'tls-secret': { type: 'string' },
      'tls-ca': { type: 'string' },
      'ca-config-map': { type: 'string' },
      'tls-dns-name': { type: 'string', multiple: true },
      'tls-ip': { type: 'string', multiple: true },
      'watch-namespace': { type: 'string' },
      'pod-ip': { type: 'string' },
      'push-service': { type: 'string' },
      'owner-deployment': { type: 'string' },
      'lease-duration': { type: 'string' },
      'renew-deadline': { type: 'string' },
      'retry-period': { type: 'string' },
      'alias-degraded-after': { type: 'string' },
      'ledger-redis-url': { type: 'string' },
      'ledger-redis-key-prefix': { type: 'string' },
      'log-level': { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
}
