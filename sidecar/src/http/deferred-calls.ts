// The native calls that submit or read a result billed when it is known (ADR 0913), on their way through
// http/proxy.ts. A submission holds the reservation of all its requests past its own end, handed to
// DeferredCharges under the id the answer names; a read of the result charges it to the submitter, once.
// The proxy reads as little as it can: the head of a submission's answer (for its id), a batch's results
// line by line as they pass, a batch's status whole (it is small) to point its results_url back here.

import { StringDecoder } from 'node:string_decoder';
import type { BudgetEnforcer } from '../budgets/budget-enforcer.ts';
import type { DeferredCharges, DeferredSubmission } from '../metering/deferred-charges.ts';
import { EXPIRY_GRACE_MS } from '../metering/deferred-charges.ts';
import type { PriceTable } from '../pricing/price-table.ts';
import { costsNothing } from '../pricing/provider-pricing.ts';
import type { StreamTransform } from '../pipeline/relay.ts';
import type { DeferredPlan } from '../routes/deferred-plan.ts';
import type { Span } from '../spans/span.ts';
import { batchResultsExtractor, MAX_RESULT_LINE_BYTES, nothingCharged, type BatchResultsExtractor } from '../wire-formats/batch-results.ts';
import { isRecord } from '../../../contracts/json-record.ts';
import { ProxyError } from '../errors.ts';
import { JsonLines } from '../formats/json-lines.ts';
import type { UpstreamResponse } from '../upstream/upstream-client.ts';
import { readAnswerChunks } from '../upstream/answer-body.ts';
import { NO_BYTES, NoUsageExtractor, type UsageExtractor } from '../usage/usage-extractor.ts';
import type { UsageResult } from '../usage/usage.ts';
import { reservationUsd } from '../pipeline/reservation.ts';
import { type CallRefusal, reservedUserRefusal } from '../pipeline/refusals.ts';

type Submit = Extract<DeferredPlan, { step: 'submit' }>;

/** How much of a submission's answer is read for its id and expiry: both come first. */
const ANSWER_HEAD_BYTES = 64 * 1024;
/** A batch's status is one small object; a larger one passes through with its results_url as it is. */
const MAX_STATUS_BYTES = 1024 * 1024;

/** One call's part in a deferred result, from its admission to its answer's end. */
export class DeferredCall {
  readonly #charges: DeferredCharges;
  readonly #route: string;
  readonly plan: DeferredPlan;
  /** The submission's reservation until the answer names the result, then DeferredCharges's. */
  #release: (() => void) | null = null;
  #results: BatchResultsExtractor | null = null;
  /** An OpenAI batch's reservation, read from its input file (readInput). */
  #inputUsd: number | null = null;

  constructor(charges: DeferredCharges, route: string, plan: DeferredPlan) {
    this.#charges = charges;
    this.#route = route;
    this.plan = plan;
  }

  /** Who a read of the result is charged to: the submitter, when this proxy saw the submission. */
  submitter(now: number): Pick<DeferredSubmission, 'userId' | 'projectId' | 'model'> | undefined {
    return this.plan.step === 'submit' ? undefined : this.#charges.submitter(this.#route, this.plan.id, now);
  }

  /**
   * An OpenAI batch names its requests by file: the file is read from the provider (`fetchFile`), line by line
   * as it comes, and each request's reservation summed at the discount. A file that cannot be read refuses the
   * batch: its cost could not be held. Returns the requests' model (or `mixed`) for the span; undefined when
   * there is no file to read.
   */
  async readInput(fetchFile: (path: string) => Promise<UpstreamResponse>, prices: PriceTable, provider: string): Promise<string | undefined> {
    const deferred = this.plan;
    if (deferred.step !== 'submit' || deferred.inputFile === undefined) return undefined;
    const input = await fetchFile(deferred.inputFile.path);
    if (input.statusCode >= 400) {
      input.body.discard();
      input.settle('success');
      throw new ProxyError(
        'invalid_request',
        `input_file_id ${JSON.stringify(deferred.inputFile.id)} could not be read to reserve the batch's cost: the provider answered ${input.statusCode}`,
      );
    }
    let usd = 0;
    const models = new Set<string>();
    const lines = new JsonLines(MAX_RESULT_LINE_BYTES, (line) => {
      const body = 'value' in line && isRecord(line.value) ? line.value.body : undefined;
      if (!isRecord(body) || typeof body.model !== 'string') return;
      models.add(body.model);
      const bytes = JSON.stringify(body);
      usd += reservationUsd(prices, provider, body.model, { bytes, size: Buffer.byteLength(bytes), json: body }) * deferred.discount;
    });
    try {
      await readAnswerChunks(input.body, (chunk) => lines.write(chunk));
    } catch (error) {
      input.settle('failure');
      throw error;
    }
    lines.end();
    input.settle('success');
    this.#inputUsd = usd;
    return models.size === 1 ? [...models][0]! : models.size === 0 ? 'unknown' : 'mixed';
  }

  /**
   * A submission holds the reservation of every request it names (each at the discount) until its result is
   * charged or expires; refused like a call when the budget cannot hold it. Null: admitted (or not budgeted).
   */
  reserve(budgets: Pick<BudgetEnforcer, 'reserve'> | undefined, userId: string | null, provider: string, prices: PriceTable, now: number): CallRefusal | null {
    const plan = this.plan;
    if (plan.step !== 'submit' || budgets === undefined || userId === null) return null;
    const reserved = reservedUserRefusal(userId);
    if (reserved !== null || costsNothing(provider)) return reserved;
    const outcome = budgets.reserve(userId, now, () => this.#inputUsd ?? submissionUsd(plan, provider, prices));
    if (outcome === null) return null;
    if (outcome.refusal) return outcome.refusal;
    this.#release = outcome.release;
    return null;
  }

  /** The extractor for the answer, around (or instead of) `inner`, the route's own. */
  extractor(inner: UsageExtractor, statusCode: number, prices: PriceTable, provider: string, submission: Omit<DeferredSubmission, 'holdUntil' | 'release'>): UsageExtractor {
    const plan = this.plan;
    switch (plan.step) {
      case 'submit':
        return new SubmissionAnswer(inner, (head, result) => this.#submitted(plan, head, result, submission, statusCode));
      case 'poll':
        return new PolledAnswer(inner, (result) => this.#polled(plan.id, result));
      case 'results':
        if (statusCode >= 400) return new NoUsageExtractor();
        if (this.#charges.charged(this.#route, plan.id)) return new ChargedAlready();
        this.#results = batchResultsExtractor({
          read: plan.lines,
          skip: this.#charges.chargedLines(this.#route, plan.id),
          // Two reads at once (a retry while the first still runs) share the lines: each is charged by one.
          claim: (line) => this.#charges.claimLine(this.#route, plan.id, line),
          price: (model, usage) => {
            const cost = prices.cost(provider, model, usage);
            return { costUsd: cost.costUsd * plan.discount, priced: cost.priced };
          },
        });
        return this.#results;
      case 'status':
        // OpenAI's batch names its output file once it is done: reads of that file are this batch's results.
        return plan.resultsUrl ? inner : new SubmissionAnswer(inner, (head) => this.#outputNamed(plan.id, head, statusCode));
    }
  }

  /** A status read: its results_url is pointed at this proxy's route (`base`), or null to pass it unchanged. */
  transform(base: string, statusCode: number): StreamTransform | undefined {
    if (this.plan.step !== 'status' || !this.plan.resultsUrl || statusCode >= 400) return undefined;
    return new ResultsUrlRewrite(`${base}/v1/messages/batches/${this.plan.id}/results`);
  }

  /** The call finished (`span`): a batch's results read to their end are charged, and later reads charge nothing. */
  finished(span: Span | null, now: number): void {
    if (this.#results !== null && this.plan.step === 'results' && span !== null && span.statusCode !== null && span.statusCode < 400) {
      this.#charges.settle(this.#route, this.plan.id, { whole: span.status === 'ok', lines: this.#results.lines }, now);
    }
    // A submission the provider refused, or whose answer named no id: its hold is given back now.
    this.#release?.();
    this.#release = null;
  }

  #submitted(plan: Submit, head: string, result: UsageResult, submission: Omit<DeferredSubmission, 'holdUntil' | 'release'>, statusCode: number): void {
    const id = statusCode < 400 ? answerId(head, plan.idPrefix) : undefined;
    if (id === undefined) return;
    const now = Date.now();
    const expires = plan.holdMs !== undefined ? now + plan.holdMs : answerExpiry(head);
    const release = this.#release ?? (() => undefined);
    this.#release = null;
    this.#charges.keep(this.#route, id, { ...submission, holdUntil: (expires ?? now + 24 * 3600 * 1000) + EXPIRY_GRACE_MS, release }, now);
    // A background response streamed to its end carried its usage on this call: charged here, once.
    if (result.usage !== null) this.#charges.settle(this.#route, id, { whole: true }, now);
  }

  #outputNamed(batchId: string, head: string, statusCode: number): void {
    const output = statusCode < 400 ? /"output_file_id"\s*:\s*"([A-Za-z0-9_-]{1,200})"/.exec(head)?.[1] : undefined;
    if (output !== undefined) this.#charges.link(this.#route, output, batchId);
  }

  #polled(id: string, result: UsageResult): UsageResult {
    if (result.usage === null) return result;
    const now = Date.now();
    // Only a background response submitted here is charged when read: any other stored response was charged
    // when it was made, and a read of it costs nothing.
    if (this.#charges.submitter(this.#route, id, now) === undefined || this.#charges.charged(this.#route, id)) return nothingCharged();
    this.#charges.settle(this.#route, id, { whole: true }, now);
    return result;
  }
}

/** Every request's reservation (input estimate and max output, priced) at the submission's discount. */
function submissionUsd(plan: Submit, provider: string, prices: PriceTable): number {
  let usd = 0;
  for (const request of plan.requests) {
    const bytes = JSON.stringify(request.body);
    usd += reservationUsd(prices, provider, request.model, { bytes, size: Buffer.byteLength(bytes), json: request.body }) * plan.discount;
  }
  return usd;
}

function answerId(head: string, prefix: string): string | undefined {
  const match = new RegExp(`"id"\\s*:\\s*"(${prefix}[A-Za-z0-9_-]{1,200})"`).exec(head);
  return match?.[1];
}

/** `expires_at` of the answer: an ISO time (Anthropic) or seconds since the epoch (OpenAI). */
function answerExpiry(head: string): number | undefined {
  const match = /"expires_at"\s*:\s*(?:"([^"]{1,64})"|(\d{1,12}))/.exec(head);
  const at = match?.[1] !== undefined ? Date.parse(match[1]) : match?.[2] !== undefined ? Number(match[2]) * 1000 : Number.NaN;
  return Number.isFinite(at) ? at : undefined;
}

/** Reads the head of a submission's answer (its id, its expiry) as it passes; the route's extractor reads its usage. */
class SubmissionAnswer implements UsageExtractor {
  readonly #inner: UsageExtractor;
  readonly #answered: (head: string, result: UsageResult) => void;
  #head: Buffer[] = [];
  #headBytes = 0;

  constructor(inner: UsageExtractor, answered: (head: string, result: UsageResult) => void) {
    this.#inner = inner;
    this.#answered = answered;
  }

  get sawEnd(): boolean {
    return this.#inner.sawEnd;
  }

  write(chunk: Buffer): Buffer {
    if (this.#headBytes < ANSWER_HEAD_BYTES) {
      const part = chunk.subarray(0, ANSWER_HEAD_BYTES - this.#headBytes);
      this.#head.push(Buffer.from(part));
      this.#headBytes += part.length;
    }
    return this.#inner.write(chunk);
  }

  flush(): Buffer {
    return this.#inner.flush();
  }

  end(streamError?: string): UsageResult {
    const result = this.#inner.end(streamError);
    this.#answered(Buffer.concat(this.#head).toString('utf8'), result);
    return result;
  }
}

/** A read of results charged already: passed through unread, no tokens at no cost. */
class ChargedAlready implements UsageExtractor {
  readonly sawEnd = true;

  write(chunk: Buffer): Buffer {
    return chunk;
  }

  flush(): Buffer {
    return NO_BYTES;
  }

  end(streamError?: string): UsageResult {
    const result = nothingCharged();
    if (streamError !== undefined) result.streamError = streamError;
    return result;
  }
}

/** A read of a background response: its usage is charged the first time it shows, and never again. */
class PolledAnswer implements UsageExtractor {
  readonly #inner: UsageExtractor;
  readonly #read: (result: UsageResult) => UsageResult;

  constructor(inner: UsageExtractor, read: (result: UsageResult) => UsageResult) {
    this.#inner = inner;
    this.#read = read;
  }

  get sawEnd(): boolean {
    return this.#inner.sawEnd;
  }

  write(chunk: Buffer): Buffer {
    return this.#inner.write(chunk);
  }

  flush(): Buffer {
    return this.#inner.flush();
  }

  end(streamError?: string): UsageResult {
    return this.#read(this.#inner.end(streamError));
  }
}

/**
 * A Message Batch's status names where its results are (results_url, at the provider): an SDK reads them
 * there, past the proxy, with a key it does not have. The URL is pointed at this proxy's route instead.
 */
class ResultsUrlRewrite implements StreamTransform {
  readonly failure = undefined;
  readonly #url: string;
  readonly #text = new StringDecoder('utf8');
  #body: Buffer[] = [];
  #bytes = 0;
  #passing = false;

  constructor(url: string) {
    this.#url = url;
  }

  write(chunk: Buffer): string {
    if (this.#passing) return this.#text.write(chunk);
    this.#body.push(Buffer.from(chunk));
    this.#bytes += chunk.length;
    if (this.#bytes <= MAX_STATUS_BYTES) return '';
    this.#passing = true;
    return this.#text.write(Buffer.concat(this.#body));
  }

  end(): string {
    if (this.#passing) return this.#text.end();
    const text = Buffer.concat(this.#body).toString('utf8');
    try {
      const status = JSON.parse(text) as unknown;
      if (typeof status === 'object' && status !== null && typeof (status as { results_url?: unknown }).results_url === 'string') {
        return JSON.stringify({ ...status, results_url: this.#url });
      }
    } catch {
      // Not the status object the API documents: passed on as it came.
    }
    return text;
  }
}
