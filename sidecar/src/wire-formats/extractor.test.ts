import { describe, expect, it } from 'vitest';
import { bytesAskingForUsage, createUsageExtractor, injectStreamUsage, requestNeedsInjectedUsage } from './extractor.ts';

describe('requestNeedsInjectedUsage / injectStreamUsage', () => {
  it('asks for usage only on streamed bodies that do not already ask for it', () => {
    expect(requestNeedsInjectedUsage({ model: 'gpt-4o', stream: true, messages: [] })).toBe(true);
    expect(requestNeedsInjectedUsage({ model: 'gpt-4o', stream: true, stream_options: { include_usage: false } })).toBe(true);
    expect(requestNeedsInjectedUsage({ model: 'gpt-4o', stream: true, stream_options: { include_usage: true } })).toBe(false);
    expect(requestNeedsInjectedUsage({ model: 'gpt-4o', stream: false })).toBe(false);
    expect(requestNeedsInjectedUsage({ model: 'gpt-4o' })).toBe(false);
    expect(requestNeedsInjectedUsage(null)).toBe(false);
    expect(requestNeedsInjectedUsage([{ stream: true }])).toBe(false);
  });

  it('adds include_usage without changing the caller body or its other stream options', () => {
    const body = { model: 'gpt-4o', stream: true, stream_options: { include_obfuscation: false } };
    const injected = injectStreamUsage(body);
    expect(injected).toEqual({ model: 'gpt-4o', stream: true, stream_options: { include_obfuscation: false, include_usage: true } });
    expect(body.stream_options).toEqual({ include_obfuscation: false });
    expect(requestNeedsInjectedUsage(injected)).toBe(false);
  });

  it("asks for usage in the caller's own bytes when it set no stream options, and rebuilds the body when it set some", () => {
    const text = ' \n{ "model": "gpt-4o", "stream": true, "messages": [{"role": "user", "content": "caf\\u00e9 {\\"a\\": 1}"}] }';
    const spliced = bytesAskingForUsage(Buffer.from(text), JSON.parse(text) as Record<string, unknown>).toString();
    // The caller's bytes are kept as sent (spacing, escapes), with the one member added.
    expect(spliced).toBe(' \n{"stream_options":{"include_usage":true}, "model": "gpt-4o", "stream": true, "messages": [{"role": "user", "content": "caf\\u00e9 {\\"a\\": 1}"}] }');
    expect(JSON.parse(spliced)).toEqual({ ...(JSON.parse(text) as object), stream_options: { include_usage: true } });
    for (const options of [{ include_obfuscation: false }, null]) {
      const body = { model: 'gpt-4o', stream: true, stream_options: options };
      const rebuilt = JSON.parse(bytesAskingForUsage(Buffer.from(JSON.stringify(body)), body).toString()) as Record<string, unknown>;
      expect(rebuilt).toEqual({ ...body, stream_options: { ...options, include_usage: true } });
      expect(requestNeedsInjectedUsage(rebuilt)).toBe(false);
    }
  });
});

describe('createUsageExtractor', () => {
  const openAiSse = Buffer.from(
    'data: {"id":"c","object":"chat.completion.chunk","model":"gpt-4o","choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":"stop"}],"usage":null}\n\n' +
      'data: {"id":"c","object":"chat.completion.chunk","model":"gpt-4o","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":2,"total_tokens":11}}\n\n' +
      'data: [DONE]\n\n',
  );

  it('reads a body without Content-Type by its first byte', () => {
    const sse = createUsageExtractor({ format: 'openai', contentType: undefined, headers: {} });
    expect(sse.write(openAiSse)).toBe(openAiSse);
    expect(sse.end().usage?.totalTokens).toBe(11);
    const json = createUsageExtractor({ format: 'openai', contentType: '', headers: {} });
    json.write(Buffer.from('\n {"model":"gpt-4o","usage":{"prompt_tokens":3,"completion_tokens":4}}'));
    expect(json.end().usage?.totalTokens).toBe(7);
  });

  it('passes error statuses through unread', () => {
    const extractor = createUsageExtractor({ format: 'openai', contentType: 'text/event-stream', headers: {}, statusCode: 500, stripInjectedUsage: true });
    expect(extractor.write(openAiSse)).toBe(openAiSse);
    expect(extractor.end()).toEqual({ usage: null });
  });

  it('never throws out of write() on garbage, and reports it at the end', () => {
    const garbage = Buffer.from([0xff, 0x00, 0x0a, 0x0d, 0x7b, 0x22, 0x5b]);
    for (const format of ['openai', 'gemini', 'anthropic', 'bedrock'] as const) {
      for (const contentType of ['text/event-stream', 'application/json', 'application/vnd.amazon.eventstream', undefined]) {
        const extractor = createUsageExtractor({ format, contentType, headers: {}, stripInjectedUsage: format === 'openai' });
        expect(() => {
          extractor.write(garbage);
          extractor.write(garbage);
          extractor.flush();
        }).not.toThrow();
        expect(extractor.end().usage).toBeNull();
      }
    }
  });
});
