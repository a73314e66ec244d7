// spec.models is handed to the sidecars as it is: its schema is the runtime's own (ADR 0602), so the API server
// already refused what a schema can say (no targets, a weight of 0, an unknown trigger). What needs the whole
// ProxyConfig the operator checks before any sidecar sees it, as a sidecar would: every target names a route that
// exists here (a built-in one or one of spec.routes) and that /v1 can call, and no target's model is another
// alias. A ProxyConfig that fails is Ready=False, the message naming the field (spec.models.<alias>.targets[i].route).

import type { ConfiguredRouteSpec } from '../../crds/index.ts';
import { checkModelAliases, type ModelAliasesConfig } from '../../contracts/model-aliases.ts';
import { type FormatSpec, isRouteName, ROUTE_FORMATS, ROUTES } from '../../contracts/routes.ts';

/** Throws ConfigError naming the first target whose route is unknown or /proxy-only, or whose model is an alias. */
export function checkAliasTargets(models: ModelAliasesConfig | undefined, routes: readonly Pick<ConfiguredRouteSpec, 'name' | 'format'>[] | undefined): void {
  if (models === undefined) return;
  const configured = new Map((routes ?? []).map((route) => [route.name, route.format]));
  checkModelAliases(models, (name) => {
    if (isRouteName(name)) return ROUTES[name].v1 !== undefined ? 'v1' : 'native-only';
    const format = configured.get(name);
    if (format === undefined) return undefined;
    return (ROUTE_FORMATS[format] as FormatSpec).proxyOnly ? 'native-only' : 'v1';
  });
}
