// ProxyConfig spec → the sidecar's runtime config patch, as pure functions (no I/O): render() shapes the
// spec, resolveCredentials() picks the referenced values out of Secrets the caller looked up. The result is
// checked with the sidecar's own validator, so a spec the sidecar would refuse is rejected here first, with
// the same field-naming message.

import type { BedrockEndpointSpec, ConfiguredRouteSpec, DirectEndpointSpec, ProxyConfigSpec, RouteEndpointSpec, SecretKeyRef, VertexEndpointSpec } from '../../crds/index.ts';
import { BUILT_IN_CREDENTIALS, CREDENTIAL_KINDS, endpointSecretName, routeSecretName, type BuiltInCredential, type CredentialKindName } from '../../contracts/credential-kinds.ts';
import { ConfigError } from '../../contracts/config-error.ts';
import { ROUTES, isRouteName } from '../../contracts/routes.ts';
import { parseRuntimeConfigPatch, type RuntimeConfigPatch } from '../../contracts/config-schema.ts';
import { CREDENTIALS_LABEL_SELECTOR } from './controller/secret-object.ts';
import { type SnapshotCredentialName, storageCredentialName } from '../../contracts/snapshot-credentials.ts';
import { auditSecrets, renderAudit } from './render-audit.ts';
import { checkAliasTargets } from './render-models.ts';

export interface CredentialRef extends SecretKeyRef {
  /** The value's name in the snapshot (contracts/snapshot-credentials.ts). */
  name: SnapshotCredentialName;
  /** Field path in the spec, for messages. */
  field: string;
}

export interface RenderedConfig {
  patch: RuntimeConfigPatch;
  credentialRefs: CredentialRef[];
}

function defined<T extends object>(value: T): T {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as T;
}

/**
 * Shapes a spec into a RuntimeConfigPatch and lists the Secret keys it needs. Throws ConfigError (message
 * naming the field, e.g. `pricing.models[1] repeats ...`) when the sidecar would refuse the result.
 */
export function render(spec: ProxyConfigSpec | undefined): RenderedConfig {
  const s = spec ?? {};
  const draft: Record<string, unknown> = {};
  if (s.pricing?.models) draft.pricing = { models: s.pricing.models.map((m) => defined({ ...m })) };
  if (s.cache) draft.cache = structuredClone(s.cache);
  const endpointRefs: CredentialRef[] = [];
  if (s.upstreams) draft.upstreams = renderUpstreams(s.upstreams, endpointRefs);
  const routes = s.routes ? renderRoutes(s.routes) : undefined;
  if (routes) {
    draft.routes = routes.routes;
    // A route's prices are price entries under its provider.
    if (routes.prices.length > 0) draft.pricing = { models: [...((draft.pricing as { models?: unknown[] } | undefined)?.models ?? []), ...routes.prices] };
  }
  if (s.breaker) draft.breaker = defined({ ...s.breaker });
  const storageRefs: CredentialRef[] = [];
  if (s.storage) {
    // Key files travel as credentials, like the routes' keys; the sidecar points credentialsFile at them.
    const { bigquery, firestore, ...rest } = s.storage;
    const section = (name: 'bigquery' | 'firestore', spec: typeof bigquery | typeof firestore) => {
      if (!spec) return undefined;
      const { credentials, ...settings } = spec;
      if (credentials) storageRefs.push({ name: storageCredentialName(name), field: `storage.${name}.credentials`, ...credentials });
      return defined({ ...settings });
    };
    draft.storage = defined({ ...rest, bigquery: section('bigquery', bigquery), firestore: section('firestore', firestore) });
  }
  if (s.gateway) draft.gateway = defined({ ...s.gateway });
  if (s.metrics) draft.metrics = structuredClone(s.metrics);
  if (s.tracing) draft.tracing = structuredClone(s.tracing);
  if (s.provenance) {
    // The enforcement fields are the operator's (ADR 1602); the sidecar's schema does not know them.
    const { enforcement: _mode, enforcementAction: _action, ...sidecar } = s.provenance;
    draft.provenance = structuredClone(sidecar);
  }
  if (s.models) draft.models = structuredClone(s.models);
  const audit = s.audit ? renderAudit(s.audit) : undefined;
  if (audit) draft.audit = audit.draft;
  // Credentials are not part of the patch: the sidecar writes the values to its own files and points
  // credentials.*File at them.
  const patch = parseRuntimeConfigPatch(draft);
  checkAliasTargets(patch.models, s.routes);

  const refs: CredentialRef[] = builtInCredentialRefs(s.credentials);
  if (routes) refs.push(...routes.refs);
  refs.push(...endpointRefs);
  if (audit) refs.push(...audit.refs);
  refs.push(...storageRefs);
  return { patch, credentialRefs: refs };
}

/** The built-in credentials' Secret references (spec.credentials), one per secret of the credential table. */
function builtInCredentialRefs(spec: ProxyConfigSpec['credentials']): CredentialRef[] {
  const c = (spec ?? {}) as Record<string, (SecretKeyRef & Record<string, string>) | undefined>;
  const refs: CredentialRef[] = [];
  for (const credential of Object.values(BUILT_IN_CREDENTIALS as Readonly<Record<string, BuiltInCredential>>)) {
    const ref = credential.crdField === undefined ? undefined : c[credential.crdField];
    if (ref === undefined) continue;
    for (const [role, secret] of Object.entries(credential.secrets)) {
      const name = secret.snapshot as CredentialRef['name'];
      if (!credential.grouped) {
        refs.push({ name, field: `credentials.${credential.crdField}`, secretName: ref.secretName, key: ref.key });
        continue;
      }
      const key = ref[`${role}Key`] ?? secret.defaultKey;
      if (key !== undefined) refs.push({ name, field: `credentials.${credential.crdField}.${role}Key`, secretName: ref.secretName, key });
    }
  }
  return refs;
}

/**
 * spec.routes → the runtime config's routes (without their Secret references), the price entries of their
 * `prices`, and the Secret keys their credentials name (snapshot names `route.<name>.<role>`).
 */
function renderRoutes(specs: readonly ConfiguredRouteSpec[], refs: CredentialRef[] = []): { routes: unknown[]; prices: unknown[]; refs: CredentialRef[] } {
  const prices: unknown[] = [];
  const routes = specs.map((spec, i) => {
    const { prices: routePrices, credential, ...route } = spec;
    const roles = Object.keys(CREDENTIAL_KINDS[credential.kind].secrets);
    const settings = Object.fromEntries(Object.entries(credential).filter(([key]) => !roles.includes(key)));
    for (const role of roles) {
      const ref = (credential as unknown as Record<string, SecretKeyRef | undefined>)[role];
      if (ref) refs.push({ name: routeSecretName(spec.name, role), field: `routes[${i}].credential.${role}`, secretName: ref.secretName, key: ref.key });
    }
    for (const price of routePrices ?? []) prices.push(defined({ provider: spec.provider ?? spec.name, ...price }));
    const endpoints = route.endpoints && renderEndpoints(spec.name, credential.kind, route.endpoints, `routes[${i}].endpoints`, refs);
    return defined({ ...structuredClone(route), credential: settings, endpoints });
  });
  return { routes, prices, refs };
}

/** spec.upstreams → the runtime config's, each endpoint's Secret references taken out into `refs`. */
function renderUpstreams(specs: NonNullable<ProxyConfigSpec['upstreams']>, refs: CredentialRef[]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [route, spec] of Object.entries(specs) as [string, { endpoints?: EndpointSpec[] }][]) {
    // An unknown route is left for the validator to name.
    const kind = isRouteName(route) ? BUILT_IN_CREDENTIALS[ROUTES[route].credential].definition.kind : 'none';
    const endpoints = spec.endpoints && renderEndpoints(route, kind, spec.endpoints, `upstreams.${route}.endpoints`, refs);
    out[route] = defined({ ...structuredClone(spec), endpoints });
  }
  return out;
}

/** An endpoint as the CRD has it: its settings, and a Secret reference per secret of its own credential. */
type EndpointSpec = RouteEndpointSpec | VertexEndpointSpec | BedrockEndpointSpec | DirectEndpointSpec;

/**
 * An endpoint's own key is a Secret reference delivered like a route's (snapshot name
 * `route.<route>.<endpoint>.<role>`, ADR 0008); it may name only the secrets of its route's credential kind.
 */
function renderEndpoints(route: string, kind: CredentialKindName, endpoints: readonly EndpointSpec[], field: string, refs: CredentialRef[]): unknown[] {
  const roles = CREDENTIAL_KINDS[kind].secrets;
  return endpoints.map((endpoint, i) => {
    const { credential: own, ...settings } = endpoint;
    const credential = own as Readonly<Record<string, SecretKeyRef | undefined>> | undefined;
    for (const [role, ref] of Object.entries(credential ?? {})) {
      if (ref === undefined) continue;
      if (!Object.hasOwn(roles, role)) {
        const known = Object.keys(roles);
        throw new ConfigError(
          `${field}[${i}].credential.${role}`,
          `is not a secret of the route's credential kind ${kind} (${known.length > 0 ? `expected one of: ${known.join(', ')}` : 'it takes no key'})`,
        );
      }
      refs.push({ name: endpointSecretName(route, endpoint.name, role), field: `${field}[${i}].credential.${role}`, secretName: ref.secretName, key: ref.key });
    }
    const [first, second] = CREDENTIAL_KINDS[kind].together ?? [];
    if (first !== undefined && second !== undefined && (credential?.[first] === undefined) !== (credential?.[second] === undefined)) {
      throw new ConfigError(`${field}[${i}].credential.${second}`, `and ${first} must be set together`);
    }
    return structuredClone(settings);
  });
}

/** What resolveCredentials needs of a Secret: its data (base64 values, as the API returns them). */
export interface SecretData {
  data?: Record<string, string>;
}

export type CredentialResolution = { ok: true; values: Record<string, Buffer> } | { ok: false; reason: 'SecretNotFound' | 'SecretKeyNotFound'; message: string };

/** Picks each referenced key out of its Secret; the first missing Secret or key is reported by field. */
export function resolveCredentials(refs: readonly CredentialRef[], secret: (name: string) => SecretData | undefined): CredentialResolution {
  const values: Record<string, Buffer> = {};
  for (const ref of refs) {
    const found = secret(ref.secretName);
    if (!found) {
      // The cache holds labelled Secrets only, so an unlabelled one looks absent; the message says both.
      return {
        ok: false,
        reason: 'SecretNotFound',
        message: `${ref.field}: Secret ${JSON.stringify(ref.secretName)} not found in the namespace, or not labelled ${CREDENTIALS_LABEL_SELECTOR}`,
      };
    }
    // Own keys only: `constructor` is a valid Secret key name and must not find Object's.
    const encoded = found.data && Object.hasOwn(found.data, ref.key) ? found.data[ref.key] : undefined;
    if (encoded === undefined) {
      return {
        ok: false,
        reason: 'SecretKeyNotFound',
        message: `${ref.field}: Secret ${JSON.stringify(ref.secretName)} has no key ${JSON.stringify(ref.key)}`,
      };
    }
    values[ref.name] = Buffer.from(encoded, 'base64');
  }
  return { ok: true, values };
}

/** The Secrets (by name, in the ProxyConfig's namespace) a spec refers to; used to map Secret events to ProxyConfigs. */
export function referencedSecrets(spec: ProxyConfigSpec | undefined): string[] {
  return [
    ...new Set(
      [
        ...builtInCredentialRefs(spec?.credentials).map((ref) => ref.secretName),
        ...secretsNamedBy((refs) => spec?.routes && renderRoutes(spec.routes, refs)),
        ...secretsNamedBy((refs) => spec?.upstreams && renderUpstreams(spec.upstreams, refs)),
        ...auditSecrets(spec?.audit),
        spec?.storage?.bigquery?.credentials?.secretName,
        spec?.storage?.firestore?.credentials?.secretName,
      ].filter((n): n is string => !!n),
    ),
  ];
}

/** The Secrets a render step names; one that refuses the spec (an endpoint's key of another kind) names those it reached. */
function secretsNamedBy(collect: (refs: CredentialRef[]) => unknown): string[] {
  const refs: CredentialRef[] = [];
  try {
    collect(refs);
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
  }
  return refs.map((ref) => ref.secretName);
}
