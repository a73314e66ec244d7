// An upstream answer's body fed from a stream the test writes, as undici's parser feeds one (answer-body.ts):
// the body's pause and resume pause and resume the stream, and dropping the answer destroys it, so a test
// sees what the reader did to the upstream by the stream's state.

import type { Readable } from 'node:stream';
import type { Dispatcher } from 'undici';
import { AnswerBody } from '../../sidecar/src/upstream/answer-body.ts';
import type { UpstreamResponse } from '../../sidecar/src/upstream/upstream-client.ts';

export function answerBodyFrom(stream: Readable, statusCode = 200, headers: AnswerBody['headers'] = {}): AnswerBody {
  const body = new AnswerBody(null, noop, noop);
  const controller: Dispatcher.DispatchController = {
    get aborted() {
      return stream.destroyed;
    },
    get paused() {
      return stream.isPaused();
    },
    reason: null,
    abort: () => stream.destroy(),
    pause: () => stream.pause(),
    resume: () => stream.resume(),
  };
  body.onRequestStart(controller);
  body.onResponseStart(controller, statusCode, headers);
  stream.on('data', (chunk: Buffer) => body.onResponseData(controller, chunk));
  stream.once('end', () => body.onResponseEnd());
  stream.once('error', (error: Error) => body.onResponseError(controller, error));
  return body;
}

/** A 200 answer whose body the test writes to `stream`, as the upstream client hands one to the relay. */
export function upstreamAnswerFrom(stream: Readable, headers: UpstreamResponse['headers']): UpstreamResponse {
  const now = performance.now();
  return { statusCode: 200, headers, body: answerBodyFrom(stream), settle: noop, timing: { startedAt: now, headersAt: now, endedAt: Number.NaN } };
}

function noop(): void {}
