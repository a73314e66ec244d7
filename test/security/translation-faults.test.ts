// A hostile or broken upstream's answer that the /v1 translation cannot handle (a tool call without its
// `function`, which OpenAI never sends) used to reach the caller as the gateway's own exception:
// `the upstream stream could not be translated: Cannot read properties of undefined (reading 'name')`.
// The caller now gets a fixed sentence in its API's own error shape, naming the malformed event; the
// exception goes to the log only, and the process serves the next call.

import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { waitFor } from '../support/wait-for.ts';
import { defaultReply, postJson, startSecurityBed, type SecurityBed, type UpstreamReply } from './security-bed.ts';

let bed: SecurityBed;

beforeAll(async () => {
  bed = await startSecurityBed();
  // An OpenAI-compatible route: /v1/messages and /v1/responses reach it through the chat pivot, so its answers
  // are translated (the built-in beta passes Responses through).
  const route = { name: 'hostile', format: 'openai-chat', baseUrl: `${bed.upstream.url}/base`, credential: { kind: 'none' }, models: ['hostile-model'] };
  const configured = await postJson(bed, '/_local/api/config', { routes: [route] });
  expect(configured.status).toBe(200);
});

afterAll(async () => {
  await bed?.close();
});

afterEach(() => {
  bed.reply = defaultReply;
});

const INTERNAL = /TypeError|Cannot read properties|reading '|\n\s+at /;
const LOG = 'upstream answer could not be translated';

const chunk = (delta: Record<string, unknown>) =>
  `data: ${JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', created: 1, model: 'hostile-model', choices: [{ index: 0, delta, finish_reason: null }] })}\n\n`;

/** A stream whose second event is a tool call without its `function`. */
const malformedToolCallStream: UpstreamReply = (_call, res) => {
  res.writeHead(200, { 'content-type': 'text/event-stream' });
  res.write(chunk({ role: 'assistant', content: '' }));
  res.write(chunk({ tool_calls: [{ index: 0, id: 'call_1', type: 'function' }] }));
  res.end('data: [DONE]\n\n');
};

/** SSE events as [type, parsed data]. */
function events(text: string): [string, Record<string, unknown>][] {
  return text
    .split('\n\n')
    .filter((block) => block.includes('data: '))
    .map((block) => {
      const type = /^event: (.*)$/m.exec(block)?.[1] ?? '';
      return [type, JSON.parse(/^data: (.*)$/m.exec(block)![1]!) as Record<string, unknown>];
    });
}

async function faultLogged(since: number): Promise<Record<string, unknown>> {
  return waitFor('the translation fault in the log', () => bed.proxy.logs.slice(since).find((line) => line.msg === LOG));
}

async function alive(): Promise<void> {
  expect(bed.proxy.child.exitCode).toBeNull();
  const next = await postJson(bed, '/v1/chat/completions', { model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] });
  expect(next.status).toBe(200);
}

describe('a malformed upstream event in a translated stream', () => {
  it('a Messages caller gets an Anthropic error event naming the event, not the exception; the log has the exception', async () => {
    bed.reply = malformedToolCallStream;
    const since = bed.proxy.logs.length;
    const res = await postJson(bed, '/v1/messages', { model: 'hostile-model', max_tokens: 10, stream: true, messages: [{ role: 'user', content: 'hi' }] });
    expect(res.status).toBe(200);
    const text = await res.text();
    expect(text).not.toMatch(INTERNAL);
    const last = events(text).at(-1)!;
    expect(last).toEqual([
      'error',
      {
        type: 'error',
        error: {
          type: 'api_error',
          message: 'upstream hostile stream failed: the upstream sent a malformed event (event 2 of its stream) that could not be translated; the answer ends here',
        },
      },
    ]);
    const logged = await faultLogged(since);
    expect(logged).toMatchObject({ level: 40, route: 'hostile', event_index: 2, event_type: '' });
    expect((logged.err as { message: string }).message).toContain('Cannot read properties of undefined');
    await alive();
  });

  it('a Responses caller gets response.failed and an error event in the Responses shape', async () => {
    bed.reply = malformedToolCallStream;
    const res = await postJson(bed, '/v1/responses', { model: 'hostile-model', stream: true, input: 'hi' });
    expect(res.status).toBe(200);
    const text = await res.text();
    expect(text).not.toMatch(INTERNAL);
    const [failed, error] = events(text).slice(-2);
    const message = 'upstream hostile stream failed: the upstream sent a malformed event (event 2 of its stream) that could not be translated; the answer ends here';
    expect(failed![0]).toBe('response.failed');
    expect((failed![1].response as { error: unknown }).error).toEqual({ code: 'server_error', message });
    expect(error).toEqual(['error', expect.objectContaining({ type: 'error', code: 'upstream_stream_error', message, param: null })]);
    await alive();
  });
});

describe('a malformed whole answer', () => {
  it("is a 502 in the caller's shape with a fixed message; the log has the exception", async () => {
    bed.reply = (_call, res) => {
      const completion = {
        id: 'c1',
        object: 'chat.completion',
        created: 1,
        model: 'hostile-model',
        choices: [{ index: 0, message: { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function' }] }, finish_reason: 'tool_calls' }],
        usage: { prompt_tokens: 3, completion_tokens: 2, total_tokens: 5 },
      };
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(completion));
    };
    const since = bed.proxy.logs.length;
    const res = await postJson(bed, '/v1/messages', { model: 'hostile-model', max_tokens: 10, messages: [{ role: 'user', content: 'hi' }] });
    expect(res.status).toBe(502);
    const text = await res.text();
    expect(text).not.toMatch(INTERNAL);
    expect(JSON.parse(text)).toEqual({
      type: 'error',
      error: { type: 'api_error', message: "upstream_stream_error: upstream hostile sent a malformed answer that could not be translated into the caller's API" },
    });
    const logged = await faultLogged(since);
    expect(logged).toMatchObject({ level: 40, route: 'hostile' });
    expect((logged.err as { message: string }).message).toContain('Cannot read properties of undefined');
    await alive();
  });
});
