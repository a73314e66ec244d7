// fastify requires its JSON-schema compilers (ajv, fast-json-stringify) when an instance is created, whether or
// not any route declares a schema. These factories load them on the first route that does, so an engine whose
// routes check their bodies themselves never holds ajv (about 2 MB of heap, ADR 0003), and a route that declares
// a schema still gets fastify's own validation.

import { createRequire } from 'node:module';
import type { FastifyServerOptions } from 'fastify';

type CompilersFactory = NonNullable<NonNullable<FastifyServerOptions['schemaController']>['compilersFactory']>;
/** What both packages export: a selector that returns the factory fastify calls with (externalSchemas, options). */
type Selector = () => (externalSchemas: unknown, options: unknown) => unknown;

// Resolved from fastify's own location: these are its dependencies, at the versions it was tested with.
const requireFromFastify = createRequire(createRequire(import.meta.url).resolve('fastify'));

function lazyFactory(pkg: string): (externalSchemas: unknown, options: unknown) => unknown {
  return (externalSchemas, options) => (requireFromFastify(pkg) as Selector)()(externalSchemas, options);
}

export const lazySchemaCompilers: CompilersFactory = {
  buildValidator: lazyFactory('@fastify/ajv-compiler') as NonNullable<CompilersFactory['buildValidator']>,
  buildSerializer: lazyFactory('@fastify/fast-json-stringify-compiler') as NonNullable<CompilersFactory['buildSerializer']>,
};
