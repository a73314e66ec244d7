// The tollgate.dev API: the CRD manifests (`tollgate crds | kubectl apply -f -`), the names clients need to
// reach the resources, and the generated types.

import { renderCrdsYaml } from './crd-manifest.ts';
import { CRD_SOURCES } from './generated-files.ts';
import { PROXY_CONFIG_CRD } from './proxy-config.ts';

export type * from './generated/proxy-config-types.ts';

export const CRD_GROUP = PROXY_CONFIG_CRD.group;

const storageVersion = PROXY_CONFIG_CRD.versions.find((v) => v.storage)!.name;

/** Coordinates of ProxyConfig for API clients (CustomObjectsApi, informers, events). */
export const PROXY_CONFIG = Object.freeze({
  group: PROXY_CONFIG_CRD.group,
  version: storageVersion,
  apiVersion: `${PROXY_CONFIG_CRD.group}/${storageVersion}`,
  kind: PROXY_CONFIG_CRD.kind,
  listKind: PROXY_CONFIG_CRD.listKind,
  plural: PROXY_CONFIG_CRD.plural,
  singular: PROXY_CONFIG_CRD.singular,
  shortName: PROXY_CONFIG_CRD.shortNames[0]!,
});

/** Every tollgate.dev CRD as one multi-document YAML stream. */
export function crdManifests(): string {
  return renderCrdsYaml(CRD_SOURCES);
}
