// What the native routes that read a request body share: the JSON object it must be, the model named in it,
// and the plan of a call whose body names nothing.

import { ProxyError } from '../errors.ts';
import { parseJsonObject } from '../formats/json-object.ts';
import type { UpstreamRequestPlan } from './route-module.ts';

export function parseRouteJson(body: Buffer, route: string): Record<string, unknown> {
  return parseJsonObject(body, (problem) =>
    problem.kind === 'syntax'
      ? new ProxyError('invalid_request', `request body on route ${route} is not valid JSON: ${problem.detail}`)
      : new ProxyError('invalid_request', `request body on route ${route} must be a JSON object`),
  );
}

export function bodyModel(json: Record<string, unknown>, route: string, required: boolean): string {
  const model = json.model;
  if (typeof model === 'string' && model.length > 0) return model;
  if (required) throw new ProxyError('invalid_request', `request body on route ${route} must have a string "model"`);
  return 'unknown';
}

/** A call forwarded as it came: model, operation and user are what the caller's path or body said. */
export function forwardedAsIs(path: string, body: Buffer | null, model: string, operation: string, bodyUserId: string | null = null): UpstreamRequestPlan {
  return { path, body, model, operation, stripInjectedUsage: false, bodyUserId };
}

/** The plan, marked as reaching the provider's stored objects when it does (stored-objects.ts). */
export function withStoredObjects(plan: UpstreamRequestPlan, storedObjects: string | undefined): UpstreamRequestPlan {
  if (storedObjects !== undefined) plan.storedObjects = storedObjects;
  return plan;
}
