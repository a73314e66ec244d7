// Fake Anthropic Files API upload: POST /v1/files, a multipart form whose `file` part (with a filename) is stored;
// the answer is the file's metadata, as the Anthropic API gives it.

import { sendAnthropicError } from './llm-errors.ts';
import { randomId } from './llm-reply-content.ts';
import { writeJson } from './llm-reply-writer.ts';
import { requestHeader } from './llm-request.ts';
import type { FakeExchange } from './llm-upstream.ts';

export async function uploadAnthropicFile(x: FakeExchange): Promise<void> {
  const contentType = requestHeader(x.req, 'content-type') ?? '';
  if (!contentType.startsWith('multipart/form-data')) return sendAnthropicError(x.res, 400, 'file: the request must be multipart/form-data');
  let form: FormData;
  try {
    form = await new Response(new Uint8Array(x.body), { headers: { 'content-type': contentType } }).formData();
  } catch {
    return sendAnthropicError(x.res, 400, 'file: the multipart form could not be read');
  }
  const file = form.get('file');
  if (file === null || typeof file === 'string' || file.name === '') return sendAnthropicError(x.res, 400, 'file: Field required');
  writeJson(x.res, 200, {
    id: randomId('file_', 24),
    type: 'file',
    filename: file.name,
    mime_type: file.type === '' ? 'application/octet-stream' : file.type,
    size_bytes: file.size,
    created_at: new Date().toISOString(),
    downloadable: false,
  });
}
