import { describe, expect, it } from 'vitest';
import { ProxyError } from '../errors.ts';
import { proxyErrorBody, upstreamErrorBody } from './openai-error.ts';

const json = (value: unknown) => Buffer.from(JSON.stringify(value));

describe("upstream errors in OpenAI's shape", () => {
  it("reads Google's error shape", () => {
    const body = json({ error: { code: 429, message: 'Resource exhausted. Please try again later.', status: 'RESOURCE_EXHAUSTED' } });
    expect(upstreamErrorBody('alpha', 429, {}, body)).toEqual({
      error: { message: 'upstream alpha answered 429: Resource exhausted. Please try again later.', type: 'rate_limit_error', param: null, code: 'resource_exhausted' },
    });
  });

  it("reads Anthropic's error shape", () => {
    const body = json({ type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' }, request_id: 'req_1' });
    expect(upstreamErrorBody('gamma-direct', 529, {}, body).error).toEqual({
      message: 'upstream gamma-direct answered 529: Overloaded',
      type: 'server_error',
      param: null,
      code: 'overloaded_error',
    });
  });

  it("reads Bedrock's message with the error type from x-amzn-errortype", () => {
    const headers = { 'x-amzn-errortype': 'ThrottlingException:http://internal.amazon.com/coral/com.amazon.bedrock/' };
    expect(upstreamErrorBody('gamma-cloudb', 429, headers, json({ message: 'Too many requests, please wait before trying again.' })).error).toEqual({
      message: 'upstream gamma-cloudb answered 429: Too many requests, please wait before trying again.',
      type: 'rate_limit_error',
      param: null,
      code: 'ThrottlingException',
    });
  });

  it("keeps OpenAI's own type, param and code", () => {
    const body = json({ error: { message: "Invalid value for 'temperature'.", type: 'invalid_request_error', param: 'temperature', code: 'invalid_value' } });
    expect(upstreamErrorBody('beta', 400, {}, body).error).toEqual({
      message: "upstream beta answered 400: Invalid value for 'temperature'.",
      type: 'invalid_request_error',
      param: 'temperature',
      code: 'invalid_value',
    });
  });

  it('quotes a body that is not JSON, shortened', () => {
    const error = upstreamErrorBody('alpha', 502, {}, Buffer.from(`<html>${'x'.repeat(2000)}</html>`)).error;
    expect(error.type).toBe('server_error');
    expect(error.message.length).toBeLessThan(600);
    expect(error.message.startsWith('upstream alpha answered 502: <html>')).toBe(true);
  });

  it("keeps the engine's status and stable code for its own failures", () => {
    const error = new ProxyError('circuit_open', 'circuit breaker for upstream gamma is open');
    expect(error.statusCode).toBe(502);
    expect(proxyErrorBody(error)).toEqual({ error: { message: 'circuit breaker for upstream gamma is open', type: 'server_error', param: null, code: 'circuit_open' } });
  });
});
