// `tollgate webhook` flags, each with an environment variable fallback (TOLLGATE_WEBHOOK_<FLAG>), parsed and
// validated in one pure function so a bad value stops start-up with a message naming the flag.

import { parseArgs } from 'node:util';
import { parseQuantity } from './quantity.ts';
import { DEFAULT_REDIS_KEY_PREFIX } from '../../contracts/budget-config.ts';
import { type BudgetStoreSettings, DEFAULT_PORT, type NativeSidecarMode, type SidecarDefaults } from './sidecar-settings.ts';

export type CertificateMode = 'self-managed' | 'files';

export interface WebhookOptions {
  host: string;
  port: number;
  namespace: string;
  logLevel: string;
  failurePolicy: 'Ignore' | 'Fail';
  certificateMode: CertificateMode;
  certDir: string;
  tlsSecret: string;
  serviceName: string;
  webhookConfigName: string;
  caValidityHours: number;
  certValidityHours: number;
  /** Read from this file instead of operatorCaConfigMap (outside a cluster). */
  operatorCaFile?: string;
  /** The ConfigMap in `namespace` the operator publishes its CA in (ADR 0809). */
  operatorCaConfigMap: string;
  /** The webhook's own Deployment (in `namespace`): owner of the TLS Secret it creates (ADR 0807). */
  ownerDeployment?: string;
  sidecar: SidecarDefaults;
  /** audit.hostSocket of the chart: mount the Tetragon socket directory into sidecars whose ProxyConfig enables audit. */
  audit?: { hostSocket: boolean; socketDir: string };
}

export const WEBHOOK_USAGE = `usage: tollgate webhook [options]      (every option also reads TOLLGATE_WEBHOOK_<OPTION>, e.g. TOLLGATE_WEBHOOK_PORT)

  --port N                      HTTPS port (default 9443)
  --host ADDR                   listen address (default 0.0.0.0)
  --namespace NS                Tollgate's namespace (default $POD_NAMESPACE); never injected
  --log-level LEVEL             trace|debug|info|warn|error (default info)
  --failure-policy P            the webhook configuration's failurePolicy, Ignore|Fail (default Ignore);
                                with Ignore, opted-in pods without the sidecar are reported as Events
  --cert-mode MODE              self-managed (own CA in a Secret, caBundle patched) | files (cert-manager)
  --cert-dir DIR                files mode: folder holding tls.crt and tls.key (default /etc/tollgate/webhook-tls)
  --tls-secret NAME             self-managed: Secret for CA and serving certificate (default tollgate-webhook-tls)
  --service-name NAME           the webhook Service, for the certificate's DNS names (default tollgate-webhook)
  --webhook-config-name NAME    MutatingWebhookConfiguration to patch the caBundle into (default tollgate)
  --ca-validity-hours H         self-managed CA lifetime (default 8760)
  --cert-validity-hours H       self-managed serving certificate lifetime (default 168)
  --owner-deployment NAME       the Deployment this webhook runs in (namespace --namespace); the TLS Secret
                                names it as its owner, so uninstalling deletes the Secret (default: no owner)
  --operator-address HOST:PORT  the operator's gRPC config-push address, given to every sidecar (required)
  --operator-ca-config-map NAME the ConfigMap (in --namespace) the operator publishes its CA in, watched
                                through the API and given to every sidecar (default tollgate-operator-ca)
  --operator-ca-file FILE       read the operator's CA from this file instead (outside a cluster)
  --sidecar-image REF           sidecar image (required)
  --sidecar-version V           version recorded in tollgate.dev/status (default: the image tag)
  --sidecar-port N              sidecar port (default ${DEFAULT_PORT})
  --sidecar-cpu-request Q       (default 50m)      --sidecar-cpu-limit Q     (default 1)
  --sidecar-memory-request Q    (default 96Mi)     --sidecar-memory-limit Q  (default 256Mi)
  --sidecar-log-level LEVEL     (default info)
  --sidecar-image-pull-policy P Always|IfNotPresent|Never (default: unset, Kubernetes decides)
  --native-sidecar MODE         auto|true|false (default auto: native when Kubernetes >= 1.29)
  --audit-host-socket B         true|false (default false): mount the Tetragon socket directory (hostPath,
                                read-only) into sidecars whose ProxyConfig enables audit
  --audit-socket-dir DIR        the agent's socket directory on the nodes (default /var/run/tetragon)
  --budget-redis-url URL        budgets.store redis: the counter store every sidecar counts its rate limits in
                                (redis:// or rediss://, without a password; default: none, per-pod counters)
  --budget-redis-key-prefix P   its key prefix, the central server's (default tollgate:budgets)
  --budget-redis-password-secret NAME/KEY
                                the store's password from this Secret and key in each pod's namespace
`;

const STRING_OPTIONS = [
  'port',
  'host',
  'namespace',
  'log-level',
  'failure-policy',
  'cert-mode',
  'cert-dir',
  'tls-secret',
  'service-name',
  'webhook-config-name',
  'ca-validity-hours',
  'cert-validity-hours',
  'owner-deployment',
  'operator-address',
  'operator-ca-file',
  'operator-ca-config-map',
  'sidecar-image',
  'sidecar-version',
  'sidecar-port',
  'sidecar-cpu-request',
  'sidecar-cpu-limit',
  'sidecar-memory-request',
  'sidecar-memory-limit',
  'sidecar-log-level',
  'sidecar-image-pull-policy',
  'native-sidecar',
  'audit-host-socket',
  'audit-socket-dir',
  'budget-redis-url',
  'budget-redis-key-prefix',
  'budget-redis-password-secret',
] as const;
type OptionName = (typeof STRING_OPTIONS)[number];

export class WebhookOptionsError extends Error {
  override name = 'WebhookOptionsError';
}

function envName(option: string): string {
  return `TOLLGATE_WEBHOOK_${option.toUpperCase().replaceAll('-', '_')}`;
}

export function parseWebhookOptions(argv: string[], env: NodeJS.ProcessEnv): WebhookOptions | 'help' {
  let values: Record<string, string | boolean | undefined>;
  try {
    const options = Object.fromEntries(STRING_OPTIONS.map((o) => [o, { type: 'string' as const }]));
    values = parseArgs({ args: argv, options: { ...options, help: { type: 'boolean', short: 'h' } }, strict: true }).values;
  } catch (error) {
    throw new WebhookOptionsError((error as Error).message);
  }
  if (values.help) return 'help';

  const get = (name: OptionName, fallback?: string): string | undefined => (values[name] as string | undefined) ?? env[envName(name)] ?? fallback;
  const required = (name: OptionName, fallback?: string): string => {
    const value = get(name, fallback);
    if (!value) throw new WebhookOptionsError(`--${name} (or ${envName(name)}) is required`);
    return value;
  };
  const oneOf = <T extends string>(name: OptionName, allowed: readonly T[], fallback: T): T => {
    const value = get(name, fallback)!;
    if (!(allowed as readonly string[]).includes(value)) {
      throw new WebhookOptionsError(`--${name}: ${JSON.stringify(value)} is not one of ${allowed.join(', ')}`);
    }
    return value as T;
  };
  const integer = (name: OptionName, fallback: number, min: number, max: number): number => {
    const text = get(name, String(fallback))!;
    const value = /^\d+$/.test(text) ? Number(text) : NaN;
    if (!(value >= min && value <= max)) throw new WebhookOptionsError(`--${name}: ${JSON.stringify(text)} is not a whole number from ${min} to ${max}`);
    return value;
  };
  const quantity = (name: OptionName, fallback: string): string => {
    const value = get(name, fallback)!;
    if (parseQuantity(value) === undefined) throw new WebhookOptionsError(`--${name}: ${JSON.stringify(value)} is not a Kubernetes quantity`);
    return value;
  };

  const image = required('sidecar-image');
  const operatorAddress = required('operator-address');
  if (!/^[^\s:]+:\d{1,5}$/.test(operatorAddress)) {
    throw new WebhookOptionsError(`--operator-address: ${JSON.stringify(operatorAddress)} is not host:port`);
  }
  const tag = /:([\w][\w.-]*)$/.exec(image.split('@')[0]!.split('/').pop() ?? '')?.[1];
  const pullPolicy = get('sidecar-image-pull-policy');
  if (pullPolicy !== undefined && !['Always', 'IfNotPresent', 'Never'].includes(pullPolicy)) {
    throw new WebhookOptionsError(`--sidecar-image-pull-policy: ${JSON.stringify(pullPolicy)} is not one of Always, IfNotPresent, Never`);
  }
  const ownerDeployment = get('owner-deployment');
  if (ownerDeployment !== undefined && !/^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/.test(ownerDeployment)) {
    throw new WebhookOptionsError(`--owner-deployment: ${JSON.stringify(ownerDeployment)} is not a Deployment name`);
  }
  const levels = ['trace', 'debug', 'info', 'warn', 'error', 'fatal'] as const;

  return {
    host: get('host', '0.0.0.0')!,
    port: integer('port', 9443, 1, 65535),
    namespace: required('namespace', env.POD_NAMESPACE),
    logLevel: oneOf('log-level', levels, 'info'),
    failurePolicy: oneOf('failure-policy', ['Ignore', 'Fail'] as const, 'Ignore'),
    certificateMode: oneOf('cert-mode', ['self-managed', 'files'] as const, 'self-managed'),
    certDir: get('cert-dir', '/etc/tollgate/webhook-tls')!,
    tlsSecret: get('tls-secret', 'tollgate-webhook-tls')!,
    serviceName: get('service-name', 'tollgate-webhook')!,
    webhookConfigName: get('webhook-config-name', 'tollgate')!,
    caValidityHours: integer('ca-validity-hours', 24 * 365, 1, 24 * 365 * 10),
    certValidityHours: integer('cert-validity-hours', 24 * 7, 1, 24 * 365),
    ...(get('operator-ca-file') ? { operatorCaFile: get('operator-ca-file')! } : {}),
    operatorCaConfigMap: get('operator-ca-config-map', 'tollgate-operator-ca')!,
    ...(ownerDeployment ? { ownerDeployment } : {}),
    sidecar: {
      image,
      version: get('sidecar-version', tag ?? 'unknown')!,
      port: integer('sidecar-port', DEFAULT_PORT, 1024, 65535),
      resources: {
        requests: { cpu: quantity('sidecar-cpu-request', '50m'), memory: quantity('sidecar-memory-request', '96Mi') },
        limits: { cpu: quantity('sidecar-cpu-limit', '1'), memory: quantity('sidecar-memory-limit', '256Mi') },
      },
      nativeSidecar: oneOf<NativeSidecarMode>('native-sidecar', ['auto', 'true', 'false'], 'auto'),
      operatorAddress,
      logLevel: oneOf('sidecar-log-level', levels, 'info'),
      ...(pullPolicy ? { imagePullPolicy: pullPolicy as 'Always' | 'IfNotPresent' | 'Never' } : {}),
      ...budgetStoreOption(get),
    },
    audit: {
      hostSocket: oneOf('audit-host-socket', ['true', 'false'] as const, 'false') === 'true',
      socketDir: (() => {
        const dir = get('audit-socket-dir', '/var/run/tetragon')!;
        if (!/^\/[^\s]*[^/\s]$/.test(dir)) throw new WebhookOptionsError(`--audit-socket-dir: ${JSON.stringify(dir)} is not an absolute directory path`);
        return dir;
      })(),
    },
  };
}

/** --budget-redis-*: the counter store the sidecars are told (ADR 1311), refused when it would carry a password. */
function budgetStoreOption(get: (name: OptionName, fallback?: string) => string | undefined): { budgetStore?: BudgetStoreSettings } {
  const url = get('budget-redis-url');
  if (!url) return {};
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new WebhookOptionsError(`--budget-redis-url: ${JSON.stringify(url)} is not a URL`);
  }
  if (parsed.protocol !== 'redis:' && parsed.protocol !== 'rediss:') throw new WebhookOptionsError(`--budget-redis-url: ${JSON.stringify(url)} is not a redis:// or rediss:// URL`);
  if (parsed.password !== '') throw new WebhookOptionsError('--budget-redis-url: carries a password; give it as a Secret with --budget-redis-password-secret NAME/KEY');
  const secret = get('budget-redis-password-secret');
  const [name, key, ...rest] = secret?.split('/') ?? [];
  if (secret !== undefined && (rest.length > 0 || !name || !key)) throw new WebhookOptionsError(`--budget-redis-password-secret: ${JSON.stringify(secret)} is not NAME/KEY`);
  return { budgetStore: { url, keyPrefix: get('budget-redis-key-prefix', DEFAULT_REDIS_KEY_PREFIX)!, ...(name && key ? { passwordSecret: { name, key } } : {}) } };
}
