import { describe, expect, it } from 'vitest';
import { ROUTE_FORMAT_NAMES, ROUTE_FORMATS, ROUTE_NAMES, ROUTES, type FormatSpec } from '../../../contracts/routes.ts';
import { FORMAT_MODULES, ROUTE_MODULES } from './route-modules.ts';

describe('the route modules', () => {
  it('has one module per table entry, agreeing with the table', () => {
    expect(Object.keys(ROUTE_MODULES).sort()).toEqual([...ROUTE_NAMES].sort());
    for (const route of ROUTE_NAMES) {
      const module = ROUTE_MODULES[route];
      expect(module.name, route).toBe(route);
      expect(module.spec, route).toBe(ROUTES[route]);
      expect(module.provider, route).toBe(ROUTES[route].provider);
      // /v1 may route only where the module can translate, and every module that can is offered to /v1
      expect(module.v1 !== undefined, route).toBe(ROUTES[route].v1 !== undefined);
    }
  });

  it('has a /v1 surface in every format the table does not mark proxyOnly (the operator checks alias targets by it)', () => {
    for (const format of ROUTE_FORMAT_NAMES) {
      const proxyOnly = (ROUTE_FORMATS[format] as FormatSpec).proxyOnly === true;
      expect(FORMAT_MODULES[format].behaviour('a-route').v1 === undefined, format).toBe(proxyOnly);
    }
    expect(ROUTE_FORMAT_NAMES.filter((format) => (ROUTE_FORMATS[format] as FormatSpec).proxyOnly)).toEqual(['anthropic-vertex-raw']);
  });

  it("answers refusals in the shape its callers' SDK reads", () => {
    expect(ROUTE_MODULES.beta.errors.body(429, 'budget_exceeded', 'spent')).toEqual({
      error: { message: 'spent', type: 'rate_limit_error', param: null, code: 'budget_exceeded' },
    });
    expect(ROUTE_MODULES['alpha-compat'].errors.format).toBe('openai');
    for (const route of ['gamma', 'gamma-cloud', 'gamma-direct'] as const) {
      expect(ROUTE_MODULES[route].errors.body(429, 'budget_exceeded', 'spent'), route).toEqual({
        type: 'error',
        error: { type: 'rate_limit_error', message: 'budget_exceeded: spent' },
      });
    }
    // Bedrock's callers are the Anthropic Bedrock SDK (reads `error`) and the AWS SDK (reads `__type` and `message`).
    expect(ROUTE_MODULES['gamma-cloudb'].errors.body(429, 'budget_exceeded', 'spent')).toEqual({
      type: 'error',
      error: { type: 'rate_limit_error', message: 'budget_exceeded: spent' },
      message: 'budget_exceeded: spent',
      __type: 'ThrottlingException',
    });
    expect(ROUTE_MODULES.alpha.errors.body(429, 'budget_exceeded', 'spent')).toEqual({
      error: { code: 429, message: 'budget_exceeded: spent', status: 'RESOURCE_EXHAUSTED' },
    });
    expect(ROUTE_MODULES.alpha.errors.body(400, 'invalid_request', 'x')).toMatchObject({ error: { status: 'INVALID_ARGUMENT' } });
    expect(ROUTE_MODULES['gamma-direct'].errors.body(403, 'forbidden', 'x')).toMatchObject({ error: { type: 'permission_error' } });
  });
});
