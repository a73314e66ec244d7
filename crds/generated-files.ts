// The files generated from the CRD sources, with their repository-relative paths. One list, used by the
// generator (write or --check) and by the staleness test, so both always agree on what is generated.

import { renderCrdYaml } from './crd-manifest.ts';
import type { CrdSource } from './crd-schema.ts';
import { BUDGET_POLICY_CRD } from './budget-policy.ts';
import { PROXY_CONFIG_CRD } from './proxy-config.ts';
import { renderTypes } from './type-source.ts';

export const CRD_SOURCES: readonly CrdSource[] = [PROXY_CONFIG_CRD, BUDGET_POLICY_CRD];

export const GENERATE_COMMAND = 'node crds/generate.ts';

export interface GeneratedFile {
  /** Relative to the repository root. */
  path: string;
  content: string;
}

export function generatedFiles(): GeneratedFile[] {
  const files: GeneratedFile[] = [];
  for (const source of CRD_SOURCES) {
    const yaml = renderCrdYaml(source);
    const name = `${source.group}_${source.plural}.yaml`;
    files.push({ path: `crds/generated/${name}`, content: yaml });
    // Helm installs files under a chart's crds/ before anything else and never templates them.
    files.push({ path: `charts/tollgate/crds/${name}`, content: yaml });
  }
  files.push({ path: 'crds/generated/proxy-config-types.ts', content: renderTypes(CRD_SOURCES) });
  return files;
}

/** Why a committed file differs from a fresh render, or undefined when they are equal. */
export function staleness(path: string, committed: string | undefined, generated: string): string | undefined {
  if (committed === generated) return undefined;
  if (committed === undefined) return `${path} is missing`;
  const a = committed.split('\n');
  const b = generated.split('\n');
  let line = 0;
  while (line < a.length && line < b.length && a[line] === b[line]) line++;
  const show = (s: string | undefined): string => (s === undefined ? '(end of file)' : JSON.stringify(s.trim()));
  return `${path} is stale: line ${line + 1} is ${show(a[line])}, the source now gives ${show(b[line])}`;
}
