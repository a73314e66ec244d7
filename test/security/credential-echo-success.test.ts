// A 200 answer that quotes the proxy's credential (an upstream echoing the request it got, a model repeating
// its headers) was passed through unredacted: only error answers were scrubbed. Successful answers are now
// scrubbed, their headers and their bytes as they pass, streams included, a key split over two upstream reads too, on the native
// routes and through /v1 (passed through or translated), and the usage is still read.

import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { waitFor } from '../support/wait-for.ts';
import { chat, chatCompletion, defaultReply, OPENAI_KEY, postJson, startSecurityBed, type SecurityBed, type UpstreamReply } from './security-bed.ts';

let bed: SecurityBed;

beforeAll(async () => {
  bed = await startSecurityBed();
});

afterAll(async () => {
  await bed?.close();
});

afterEach(() => {
  bed.reply = defaultReply;
});

/** The same length as the key (23 bytes), so a declared Content-Length stays true. */
const MARKER = '[redacted by tollgate]*';
const KEY_START = OPENAI_KEY.slice(0, 10); // 'sk-proxy-o'

const sse = (delta: Record<string, unknown>, finish: string | null = null, usage?: Record<string, unknown>) =>
  `data: ${JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', created: 1, model: 'gpt-4o-mini', choices: [{ index: 0, delta, finish_reason: finish }], ...(usage ? { usage } : {}) })}\n\n`;

/** A gate the test opens once the caller holds what the first upstream write became. */
function gate(): { opened: Promise<void>; open: () => void } {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  return { opened, open };
}

/**
 * An SSE answer whose second event quotes the key, cut inside the key: the first write ends with its first
 * ten bytes, the rest is written only when the gate opens, so the proxy reads them apart.
 */
function splitKeyStream(release: Promise<void>): UpstreamReply {
  const quoted = sse({ content: `my key is ${OPENAI_KEY}, keep it` });
  const cut = quoted.indexOf(OPENAI_KEY) + KEY_START.length;
  return (call, res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.write(sse({ role: 'assistant', content: 'Hello' }) + quoted.slice(0, cut));
    void release.then(() => {
      const includeUsage = (JSON.parse(call.body) as { stream_options?: { include_usage?: boolean } }).stream_options?.include_usage === true;
      res.write(quoted.slice(cut) + sse({}, 'stop'));
      if (includeUsage)
        res.write(
          `data: ${JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', created: 1, model: 'gpt-4o-mini', choices: [], usage: { prompt_tokens: 12, completion_tokens: 5, total_tokens: 17 } })}\n\n`,
        );
      res.end('data: [DONE]\n\n');
    });
  };
}

/** Reads a streamed answer; once `ready(text so far)` holds, checks what the caller has so far and opens the gate. */
async function readSplit(res: Response, ready: (text: string) => boolean, release: () => void): Promise<{ early: string; whole: string }> {
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let text = '';
  let early: string | undefined;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    text += decoder.decode(value, { stream: true });
    if (early === undefined && ready(text)) {
      early = text;
      release();
    }
  }
  return { early: early ?? '', whole: text };
}

const echoingCompletion: UpstreamReply = (_call, res) => {
  const body = chatCompletion();
  (body.choices[0]!.message as { content: string }).content = `You sent Authorization: Bearer ${OPENAI_KEY}`;
  const text = JSON.stringify(body);
  res.writeHead(200, { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(text)), 'x-debug-authorization': `Bearer ${OPENAI_KEY}` }).end(text);
};

describe("a 200 answer that quotes the proxy's credential", () => {
  it('a JSON answer on /proxy/beta: the key is replaced by a same-length marker, the length and the usage stay right', async () => {
    bed.reply = echoingCompletion;
    const res = await postJson(bed, '/proxy/beta/v1/chat/completions', chat);
    expect(res.status).toBe(200);
    expect(res.headers.get('x-debug-authorization')).toBe('[redacted by tollgate]');
    const text = await res.text();
    expect(text).not.toContain(KEY_START);
    expect(Number(res.headers.get('content-length'))).toBe(Buffer.byteLength(text));
    expect((JSON.parse(text) as { choices: { message: { content: string } }[] }).choices[0]!.message.content).toBe(`You sent Authorization: Bearer ${MARKER}`);
    expect(await bed.span(res.headers.get('x-proxy-span-id'))).toMatchObject({ status: 'ok', input_tokens: 12, output_tokens: 5 });
  });

  it('a stream on /proxy/beta with the key split over two reads: no byte of the key reaches the caller, before or after', async () => {
    const { opened, open } = gate();
    bed.reply = splitKeyStream(opened);
    // The caller asks for the usage itself, so the bytes pass as they come (no event is held to take the usage out).
    const res = await postJson(bed, '/proxy/beta/v1/chat/completions', { ...chat, stream: true, stream_options: { include_usage: true } });
    expect(res.status).toBe(200);
    const { early, whole } = await readSplit(res, (text) => text.includes('my key is '), open);
    // What the first read became reached the caller at once, less the start of the key, held back for its end.
    expect(early.endsWith('my key is ')).toBe(true);
    expect(whole).not.toContain(KEY_START);
    expect(whole).toContain(`my key is ${MARKER}, keep it`);
    expect(whole.endsWith('data: [DONE]\n\n')).toBe(true);
    const span = await waitFor('the span', () => bed.span(res.headers.get('x-proxy-span-id')));
    expect(span).toMatchObject({ status: 'ok', input_tokens: 12, output_tokens: 5 });
  });

  it('a stream the proxy takes its own usage chunk out of: the key split over two reads is replaced all the same', async () => {
    const { opened, open } = gate();
    bed.reply = splitKeyStream(opened);
    const res = await postJson(bed, '/proxy/beta/v1/chat/completions', { ...chat, stream: true });
    const { whole } = await readSplit(res, (text) => text.includes('Hello'), open);
    expect(whole).not.toContain(KEY_START);
    expect(whole).toContain(`my key is ${MARKER}, keep it`);
    expect(whole).not.toContain('"usage"');
    const span = await waitFor('the span', () => bed.span(res.headers.get('x-proxy-span-id')));
    expect(span).toMatchObject({ status: 'ok', input_tokens: 12, output_tokens: 5 });
  });

  it('through /v1: passed through, and translated for a Messages caller, whole and streamed', async () => {
    bed.reply = echoingCompletion;
    const passed = await postJson(bed, '/v1/chat/completions', chat);
    expect(passed.status).toBe(200);
    expect(await passed.text()).toContain(`Bearer ${MARKER}`);

    const messages = { model: 'gpt-4o-mini', max_tokens: 10, messages: [{ role: 'user', content: 'hi' }] };
    bed.reply = echoingCompletion;
    const whole = await postJson(bed, '/v1/messages', messages);
    expect(whole.status).toBe(200);
    expect(((await whole.json()) as { content: { text: string }[] }).content[0]!.text).toBe(`You sent Authorization: Bearer ${MARKER}`);

    const { opened, open } = gate();
    bed.reply = splitKeyStream(opened);
    const streamed = await postJson(bed, '/v1/messages', { ...messages, stream: true });
    expect(streamed.status).toBe(200);
    const read = await readSplit(streamed, (text) => text.includes('Hello'), open);
    expect(read.whole).not.toContain(KEY_START);
    expect(read.whole).toContain(`"text":"my key is ${MARKER}, keep it"`);
    expect(read.whole).toContain('event: message_stop');
  });
});
