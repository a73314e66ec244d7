// The tollgate.dev API: the CRD manifests (`tollgate crds | kubectl apply -f -`), the names clients need to
// reach the resources, and the generated types.

import { renderCrdsYaml } from './crd-manifest.ts';
import { CRD_SOURCES } from './generated-files.ts';
import { BUDGET_POLICY_CRD } from './budget-policy.ts';
import type { CrdSource } from './crd-schema.ts';
import { PROXY_CONFIG_CRD } from './proxy-config.ts';

export type * from './generated/proxy-config-types.ts';

export const CRD_GROUP = PROXY_CONFIG_CRD.group;

function coordinates(source: CrdSource) {
  const version = source.versions.find((v) => v.storage)!.name;
  return Object.freeze({
    group: source.group,
    version,
    apiVersion: `${source.group}/${version}`,
    kind: source.kind,
    listKind: source.listKind,
    plural: source.plural,
    singular: source.singular,
    shortName: source.shortNames[0]!,
  });
}

/** Coordinates of ProxyConfig for API clients (CustomObjectsApi, informers, events). */
export const PROXY_CONFIG = coordinates(PROXY_CONFIG_CRD);

/** Coordinates of BudgetPolicy. */
export const BUDGET_POLICY = coordinates(BUDGET_POLICY_CRD);

/** Every tollgate.dev CRD as one multi-document YAML stream. */
export function crdManifests(): string {
  return renderCrdsYaml(CRD_SOURCES);
}
