// Which runtime config a sidecar understands, by revision (ADR 0723). A sidecar's validator refuses what it
// does not know, and a sidecar that refuses a snapshot keeps its last good one: so an operator that sent a
// newer field to an older sidecar would freeze all of that sidecar's config, prices included. Instead the
// sidecar names its revision in the push Hello, and the operator sends each sidecar the patch without what
// its revision does not know, and says what it withheld.
//
// Adding a field to the runtime config (or a value an older validator refuses) bumps CONFIG_REVISION and adds
// an entry below that takes it out again. Entries stay as long as sidecars of that revision may run (the
// supported skew is one release either way; keeping them longer costs nothing).

import type { RuntimeConfigPatch } from './config-schema.ts';

/** The revision this release's sidecar understands; it sends it in the push Hello (proto field config_revision). */
export const CONFIG_REVISION = 3;

/** What a Hello without a revision means: a sidecar released before revisions existed. */
export const FIRST_CONFIG_REVISION = 1;

export interface ConfigAddition {
  /** The first revision that understands it. */
  revision: number;
  /** The patch as a sidecar of an earlier revision can take it; `withheld` names what was left out. */
  withhold(patch: RuntimeConfigPatch): { patch: RuntimeConfigPatch; withheld: string[] };
}

/** The providers revision 1's price validator knows (the built-in ones then; PROVIDERS may grow). */
export const REVISION_1_PROVIDERS: readonly string[] = ['google', 'openai', 'anthropic', 'local'];

/** Revision 2: configured routes (`routes`), and price entries under their providers. */
const CONFIGURED_ROUTES: ConfigAddition = {
  revision: 2,
  withhold(patch) {
    const withheld: string[] = [];
    const { routes, ...out } = patch;
    if (routes?.length) withheld.push(`routes (${routes.map((r) => r.name).join(', ')})`);
    const models = patch.pricing?.models;
    const kept = models?.filter((m) => REVISION_1_PROVIDERS.includes(m.provider));
    if (models && kept && kept.length !== models.length) {
      const providers = [...new Set(models.filter((m) => !REVISION_1_PROVIDERS.includes(m.provider)).map((m) => m.provider))];
      withheld.push(`pricing.models of provider${providers.length === 1 ? '' : 's'} ${providers.join(', ')}`);
      out.pricing = { ...patch.pricing, models: kept };
    }
    return { patch: out, withheld };
  },
};

/**
 * Revision 3: a route's `endpoints` and `strategy` (ADR 0008), under upstreams.<route> and routes[]. Safe to leave
 * out: an older sidecar sends the route's calls to the route's own base URL with its own credential.
 */
const ROUTE_ENDPOINTS: ConfigAddition = {
  revision: 3,
  withhold(patch) {
    const withheld: string[] = [];
    const out = { ...patch };
    const without = <T extends { endpoints?: unknown; strategy?: unknown }>(entry: T, name: string): Omit<T, 'endpoints' | 'strategy'> => {
      const { endpoints, strategy, ...rest } = entry;
      if (endpoints !== undefined || strategy !== undefined) withheld.push(`${name}.endpoints`);
      return rest;
    };
    if (patch.upstreams) out.upstreams = Object.fromEntries(Object.entries(patch.upstreams).map(([route, upstream]) => [route, without(upstream, `upstreams.${route}`)]));
    if (patch.routes) out.routes = patch.routes.map((route) => without(route, `routes (${route.name})`));
    return { patch: out, withheld };
  },
};

/** Revision 3 too: model aliases (`models`, contracts/model-aliases.ts). Without them /v1 answers an alias as an unknown model. */
const MODEL_ALIASES: ConfigAddition = {
  revision: 3,
  withhold(patch) {
    const { models, ...out } = patch;
    const names = Object.keys(models ?? {});
    return { patch: out, withheld: names.length > 0 ? [`models (${names.join(', ')})`] : [] };
  },
};

/**
 * Revision 3 too: `unmetered` under upstreams.<route> and routes[]. Safe to leave out: a sidecar of an earlier
 * revision forwards every path anyway.
 */
const UNMETERED: ConfigAddition = {
  revision: 3,
  withhold(patch) {
    const withheld: string[] = [];
    const out = { ...patch };
    const without = <T extends { unmetered?: unknown }>(entry: T, name: string): Omit<T, 'unmetered'> => {
      const { unmetered, ...rest } = entry;
      if (unmetered !== undefined) withheld.push(`${name}.unmetered`);
      return rest;
    };
    if (patch.upstreams) out.upstreams = Object.fromEntries(Object.entries(patch.upstreams).map(([route, upstream]) => [route, without(upstream, `upstreams.${route}`)]));
    if (patch.routes) out.routes = patch.routes.map((route) => without(route, `routes (${route.name})`));
    return { patch: out, withheld };
  },
};

/** Every addition since revision 1, oldest first. */
export const CONFIG_ADDITIONS: readonly ConfigAddition[] = [CONFIGURED_ROUTES, ROUTE_ENDPOINTS, MODEL_ALIASES, UNMETERED];

/**
 * `patch` for a sidecar of `revision`: every addition that revision predates taken out, newest first, and what
 * was withheld. A sidecar at CONFIG_REVISION or later gets the patch as it is.
 */
export function patchForRevision(patch: RuntimeConfigPatch, revision: number): { patch: RuntimeConfigPatch; withheld: string[] } {
  let out = patch;
  const withheld: string[] = [];
  for (const addition of [...CONFIG_ADDITIONS].reverse()) {
    if (revision >= addition.revision) continue;
    const taken = addition.withhold(out);
    out = taken.patch;
    withheld.push(...taken.withheld);
  }
  return { patch: out, withheld };
}
