// Chat chunks → the Responses API's event stream, as OpenAI sends it: response.created and
// response.in_progress; per output item its output_item.added, its deltas (reasoning_summary_text,
// output_text, function_call_arguments) and its done events; then response.completed (or
// response.incomplete) with the whole response and its usage. Each chunk is encoded as it comes; the delta
// events, the many, are written as text without building an object each. The protocol repeats every item
// whole in its done event and in response.completed, so the encoder keeps the output's text, bounded: past
// the bound the stream fails rather than grow. A failure is response.failed, then an `error` event, which the
// OpenAI SDKs raise as an APIError.

import type { ThinkingBlock } from './chat-extensions.ts';
import { ChoiceEncoder } from './choice-encoder.ts';
import type { ChunkToolCallDelta, ThinkingDelta } from './openai-chat.ts';
import type { ResponseItem } from './responses-request.ts';
import {
  functionCallItem,
  messageItem,
  outputText,
  reasoningItem,
  responseObject,
  responseStatus,
  responsesUsage,
  signedBlock,
  type OutputShaping,
  type ResponseHead,
  type ResponseObject,
} from './responses-output.ts';

export interface ResponsesStreamOptions extends OutputShaping {
  head: Omit<ResponseHead, 'model'>;
  /** The model to name until the upstream names one. */
  model: string;
  /** Most output text the encoder keeps for the done events; beyond it the stream fails. */
  maxOutputChars: number;
  /** Told the finished response and the items the store keeps, once the stream ended whole. */
  onDone(response: ResponseObject, stored: ResponseItem[]): void;
}

type OpenItem =
  | { kind: 'reasoning'; id: string; index: number; block: number; text: string; signature: string; redacted: string | undefined; summaryOpen: boolean }
  | { kind: 'message'; id: string; index: number; text: string }
  | { kind: 'call'; id: string; index: number; toolIndex: number; callId: string; name: string; args: string };

export class ResponsesStreamEncoder extends ChoiceEncoder {
  readonly #options: ResponsesStreamOptions;
  #head: ResponseHead | undefined;
  #sequence = 0;
  readonly #output: ResponseItem[] = [];
  readonly #stored: ResponseItem[] = [];
  #open: OpenItem | undefined;
  #chars = 0;
  #failure: string | undefined;

  constructor(options: ResponsesStreamOptions) {
    super();
    this.#options = options;
  }

  get failure(): string | undefined {
    return this.#failure;
  }

  end(): string {
    let out = this.begin(this.#options.model);
    out += this.#close();
    const { status, incomplete } = responseStatus(this.finish);
    const response = responseObject(this.#head!, status, this.#output, responsesUsage(this.usage), { incomplete });
    out += this.#event(status === 'completed' ? 'response.completed' : 'response.incomplete', { response });
    this.#options.onDone(response, this.#stored);
    return out;
  }

  fail(route: string, message: string, code: string | null): string {
    let out = this.begin(this.#options.model);
    const text = `upstream ${route} stream failed: ${message}`;
    const response = responseObject(this.#head!, 'failed', this.#output, responsesUsage(this.usage), { error: { code: 'server_error', message: text } });
    out += this.#event('response.failed', { response });
    out += this.#event('error', { code: code ?? 'server_error', message: text, param: null });
    return out;
  }

  protected begin(model: string): string {
    if (this.#head !== undefined) return '';
    this.#head = { ...this.#options.head, model };
    const response = responseObject(this.#head, 'in_progress', [], null);
    return this.#event('response.created', { response }) + this.#event('response.in_progress', { response });
  }

  protected thinking(delta: ThinkingDelta): string {
    let out = '';
    let open = this.#open;
    if (open?.kind !== 'reasoning' || open.block !== delta.block) {
      out += this.#close();
      const id = this.#options.newId('rs_');
      open = { kind: 'reasoning', id, index: this.#output.length, block: delta.block, text: '', signature: '', redacted: undefined, summaryOpen: false };
      this.#open = open;
      out += this.#event('response.output_item.added', { output_index: open.index, item: { id, type: 'reasoning', summary: [] } });
    }
    if (delta.signature !== undefined) open.signature += delta.signature;
    if (delta.redacted !== undefined) open.redacted = delta.redacted;
    if (delta.text === undefined || delta.text === '' || !this.#keep(delta.text)) return out;
    open.text += delta.text;
    if (!this.#options.summaries) return out;
    if (!open.summaryOpen) {
      open.summaryOpen = true;
      out += this.#event('response.reasoning_summary_part.added', { item_id: open.id, output_index: open.index, summary_index: 0, part: { type: 'summary_text', text: '' } });
    }
    const type = 'response.reasoning_summary_text.delta';
    return `${out}event: ${type}\ndata: {"type":"${type}","sequence_number":${this.#sequence++},"item_id":"${open.id}","output_index":${open.index},"summary_index":0,"delta":${JSON.stringify(delta.text)}}\n\n`;
  }

  protected text(text: string): string {
    let out = '';
    let open = this.#open;
    if (open?.kind !== 'message') {
      out += this.#close();
      open = { kind: 'message', id: this.#options.newId('msg_'), index: this.#output.length, text: '' };
      this.#open = open;
      out += this.#event('response.output_item.added', {
        output_index: open.index,
        item: { id: open.id, type: 'message', status: 'in_progress', role: 'assistant', content: [] },
      });
      out += this.#event('response.content_part.added', { item_id: open.id, output_index: open.index, content_index: 0, part: outputText('') });
    }
    if (!this.#keep(text)) return out;
    open.text += text;
    const type = 'response.output_text.delta';
    return `${out}event: ${type}\ndata: {"type":"${type}","sequence_number":${this.#sequence++},"item_id":"${open.id}","output_index":${open.index},"content_index":0,"delta":${JSON.stringify(text)},"logprobs":[]}\n\n`;
  }

  protected toolCall(call: ChunkToolCallDelta): string {
    let out = '';
    let open = this.#open;
    if (open?.kind !== 'call' || open.toolIndex !== call.index) {
      if (call.id === undefined) return ''; // arguments of a call whose start was never seen
      out += this.#close();
      open = { kind: 'call', id: this.#options.newId('fc_'), index: this.#output.length, toolIndex: call.index, callId: call.id, name: call.function.name ?? '', args: '' };
      this.#open = open;
      out += this.#event('response.output_item.added', {
        output_index: open.index,
        item: { id: open.id, type: 'function_call', status: 'in_progress', arguments: '', call_id: open.callId, name: open.name },
      });
    }
    const args = call.function.arguments;
    if (args === '' || !this.#keep(args)) return out;
    open.args += args;
    const type = 'response.function_call_arguments.delta';
    return `${out}event: ${type}\ndata: {"type":"${type}","sequence_number":${this.#sequence++},"item_id":"${open.id}","output_index":${open.index},"delta":${JSON.stringify(args)}}\n\n`;
  }

  /** The open item's done events; it joins the output. */
  #close(): string {
    const open = this.#open;
    if (open === undefined) return '';
    this.#open = undefined;
    let out = '';
    let item: ResponseItem;
    if (open.kind === 'reasoning') {
      if (open.summaryOpen) {
        const part = { type: 'summary_text', text: open.text };
        out += this.#event('response.reasoning_summary_text.done', { item_id: open.id, output_index: open.index, summary_index: 0, text: open.text });
        out += this.#event('response.reasoning_summary_part.done', { item_id: open.id, output_index: open.index, summary_index: 0, part });
      }
      const block: ThinkingBlock = open.redacted !== undefined ? { kind: 'redacted', data: open.redacted } : { kind: 'thinking', thinking: open.text, signature: open.signature };
      const signed = signedBlock(block);
      item = reasoningItem(open.id, open.text, signed, this.#options.summaries, this.#options.encrypted);
      this.#stored.push(reasoningItem(open.id, open.text, signed, this.#options.summaries, true));
    } else if (open.kind === 'message') {
      out += this.#event('response.output_text.done', { item_id: open.id, output_index: open.index, content_index: 0, text: open.text, logprobs: [] });
      out += this.#event('response.content_part.done', { item_id: open.id, output_index: open.index, content_index: 0, part: outputText(open.text) });
      item = messageItem(open.id, open.text);
      this.#stored.push(item);
    } else {
      out += this.#event('response.function_call_arguments.done', { item_id: open.id, output_index: open.index, name: open.name, arguments: open.args });
      item = functionCallItem(open.id, open.callId, open.name, open.args);
      this.#stored.push(item);
    }
    this.#output.push(item);
    return out + this.#event('response.output_item.done', { output_index: open.index, item });
  }

  /** Counts text the done events will repeat; false (and the stream fails) past the bound. */
  #keep(text: string): boolean {
    this.#chars += text.length;
    if (this.#chars <= this.#options.maxOutputChars) return true;
    this.#failure ??= `the answer exceeds ${this.#options.maxOutputChars} characters, the most a Responses stream is translated with`;
    return false;
  }

  #event(type: string, fields: Record<string, unknown>): string {
    return `event: ${type}\ndata: ${JSON.stringify({ type, sequence_number: this.#sequence++, ...fields })}\n\n`;
  }
}
