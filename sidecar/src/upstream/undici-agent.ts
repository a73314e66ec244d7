// undici's Agent, its request call and its error classes, loaded from the three files that define them instead
// of the package's index. The index also loads fetch, WebSocket, EventSource, the HTTP cache, the mocks and
// the proxy agents, none of which a proxy calls: ~3.5 MiB of every sidecar's private memory (ADR 0005).
// undici has no exports map, so these paths are reachable; undici-agent.test.ts checks they are the very
// objects the index exports, so an upgrade that moves one fails there and not in a pod.

import { createRequire } from 'node:module';
import type * as undici from 'undici';

const require = createRequire(import.meta.url);

export const Agent = require('undici/lib/dispatcher/agent.js') as typeof undici.Agent;
export type Agent = undici.Agent;

export const undiciErrors = require('undici/lib/core/errors.js') as typeof undici.errors;

// The index copies this onto Dispatcher.prototype as `request`; called with the dispatcher as `this` instead,
// nothing shared is patched.
const requestOnDispatcher = require('undici/lib/api/api-request.js') as (
  this: undici.Dispatcher,
  options: undici.Dispatcher.RequestOptions,
) => Promise<undici.Dispatcher.ResponseData>;

/** What `dispatcher.request(options)` does once the index is loaded: one request, its answer's head and body stream. */
export function request(dispatcher: undici.Dispatcher, options: undici.Dispatcher.RequestOptions): Promise<undici.Dispatcher.ResponseData> {
  return requestOnDispatcher.call(dispatcher, options);
}
