// The vocabulary config schemas are written in: a subset of apiextensions.k8s.io/v1 JSONSchemaProps (what a
// structural schema may use) plus annotations of our own that the CRD renderer strips: `tsType` names the
// generated TypeScript type, `hint` is the runtime validator's message for a string that fails its pattern, and
// `relations` are cross-field rules the runtime validator checks and the CRD gets as CEL (ADR 0602). It lives in
// contracts/ because the runtime config's shared sections are written in it here and crds/ builds the CRDs from
// them (ADR 1204: crds/ imports contracts/, never the reverse).

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
  /** The runtime validator's message when the string fails `pattern` (`must be a region such as us-east-1`). */
  hint?: string;
  /** Cross-field rules of an object: checked by the runtime validator, rendered as CEL for the API server. */
  relations?: readonly FieldRelation[];
}

/** `field` must not exceed `than` when both are set (`batchSize <= bufferSize`). */
export interface FieldRelation {
  field: string;
  notGreaterThan: string;
}
