// The one test for "a JSON object" (not null, not an array) that every parser of untrusted JSON starts from:
// config bodies, price entries, provider responses, chat requests.

export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** T with its possibly-undefined fields made optional instead: what dropping the unset ones leaves. */
export type Defined<T> = { [K in keyof T as undefined extends T[K] ? never : K]: T[K] } & {
  [K in keyof T as undefined extends T[K] ? K : never]?: Exclude<T[K], undefined>;
};

/** The fields that are set: with exactOptionalPropertyTypes, a field left out is not one set to undefined. */
export function definedFields<T extends object>(value: T): Defined<T> {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as Defined<T>;
}
