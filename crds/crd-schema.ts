// The vocabulary the CRD sources are written in: a subset of apiextensions.k8s.io/v1 JSONSchemaProps (what
// a structural schema may use) plus one field of our own, `tsType`, that names the generated TypeScript
// type and is stripped from the CRD. Keeping the source in the API server's own vocabulary means the YAML
// renderer is a plain copy and nothing in between can drift from what the API server checks.

import type { SchemaNode } from '../contracts/schema-node.ts';

export type { SchemaNode, ValidationRule } from '../contracts/schema-node.ts';

export interface PrinterColumn {
  name: string;
  type: 'string' | 'integer' | 'number' | 'boolean' | 'date';
  jsonPath: string;
  description?: string;
  /** 0 shows the column in `kubectl get`; 1 only with `-o wide`. */
  priority?: 0 | 1;
}

export interface CrdVersionSource {
  name: string;
  served: boolean;
  storage: boolean;
  /** The whole object: apiVersion, kind, metadata, spec, status. */
  schema: SchemaNode;
  statusSubresource: boolean;
  printerColumns: readonly PrinterColumn[];
}

/** Everything needed to render one CustomResourceDefinition and its TypeScript types. */
export interface CrdSource {
  group: string;
  kind: string;
  listKind: string;
  plural: string;
  singular: string;
  shortNames: readonly string[];
  categories: readonly string[];
  scope: 'Namespaced' | 'Cluster';
  versions: readonly CrdVersionSource[];
}
