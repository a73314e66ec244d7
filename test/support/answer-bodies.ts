// An upstream answer's body fed from a stream the test writes, as undici's parser feeds one (answer-body.ts):
// the body's pause and resume pause and resume the stream, and dropping the answer destroys it, so a test
// sees what the reader did to the upstream by the stream's state.

import type { Readable } from 'node:stream';
import type { Dispatcher } from 'undici';
import { AnswerBody } from '../../sidecar/src/upstream/answer-body.ts';

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

function noop(): void {}
