// The vocabulary the CRD sources are written in: a subset of apiextensions.k8s.io/v1 JSONSchemaProps (what
// a structural schema may use) plus one field of our own, `tsType`, that names the generated TypeScript
// type and is stripped from the CRD. Keeping the source in the API server's own vocabulary means the YAML
// renderer is a plain copy and nothing in between can drift from what the API server checks.

export type SchemaType = 'object' | 'array' | 'string' | 'integer' | 'number' | 'boolean';

/** One `x-kubernetes-validations` entry: a CEL rule checked by the API server on every write. */
export interface ValidationRule {
  rule: string;
  message: string;
  /** JSONPath (relative to the node holding the rule) of the field the error is reported on. */
  fieldPath?: string;
  reason?: 'FieldValueInvalid' | 'FieldValueForbidden' | 'FieldValueRequired' | 'FieldValueDuplicate';
}

export interface SchemaNode {
  type: SchemaType;
  description?: string;
  /**
   * Name of the TypeScript type generated for this node (an interface for objects, an alias for string
   * enums). Not part of the CRD. Nodes sharing a name must be identical.
   */
  tsType?: string;
  format?: 'int32' | 'int64' | 'double' | 'date-time' | 'byte';
  enum?: readonly (string | number)[];
  pattern?: string;
  minLength?: number;
  maxLength?: number;
  minimum?: number;
  maximum?: number;
  exclusiveMinimum?: boolean;
  exclusiveMaximum?: boolean;
  minItems?: number;
  maxItems?: number;
  minProperties?: number;
  maxProperties?: number;
  default?: unknown;
  properties?: Readonly<Record<string, SchemaNode>>;
  required?: readonly string[];
  items?: SchemaNode;
  additionalProperties?: SchemaNode;
  'x-kubernetes-list-type'?: 'atomic' | 'set' | 'map';
  'x-kubernetes-list-map-keys'?: readonly string[];
  'x-kubernetes-validations'?: readonly ValidationRule[];
}

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
