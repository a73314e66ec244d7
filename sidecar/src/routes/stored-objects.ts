// Provider-side stored objects: what a provider keeps under the key or project the proxy calls it with (stored
// chat completions and responses, conversations, files, batches, caches). Every caller of a server shares that
// key, so one user could list, read or continue another's. A native call that reaches them is marked on its
// plan; in server mode only admins may make it (http/proxy.ts, ADR 1007).

/** OpenAI API paths under /v1 that name stored objects, whatever the method. */
const OPENAI_STORES = /^\/v1\/(?:conversations|files|uploads|vector_stores|batches|fine_tuning|assistants|threads|containers|evals|chatkit|videos)(?:\/|$)/;
/** A stored chat completion by id (read, update, delete, its messages), or their list. */
const OPENAI_CHAT_BY_ID = /^\/v1\/chat\/completions\/[^/]+/;
/** A stored response by id (read, delete, cancel, input items); /v1/responses/input_tokens only counts. */
const OPENAI_RESPONSE_BY_ID = /^\/v1\/responses\/(?!input_tokens$)[^/]+/;

/** What an OpenAI-format call reaches of the key's stored objects, or undefined. `json` is its parsed body. */
export function openAiStoredObjects(method: string, rest: string, json: Record<string, unknown> | null): string | undefined {
  if (OPENAI_STORES.test(rest)) return `${rest.split('/')[2]} stored at the provider`;
  if (OPENAI_CHAT_BY_ID.test(rest) || (method === 'GET' && rest === '/v1/chat/completions')) return 'stored chat completions';
  if (OPENAI_RESPONSE_BY_ID.test(rest)) return 'a stored response';
  // A token count of a request that names a stored response or conversation counts what is stored (its size).
  if (json !== null && (rest === '/v1/responses' || rest === '/v1/responses/input_tokens')) {
    if (json.previous_response_id !== undefined && json.previous_response_id !== null) return 'a stored response (previous_response_id)';
    if (json.conversation !== undefined && json.conversation !== null) return 'a stored conversation';
  }
  return undefined;
}

/** Anthropic's Message Batches, Files and Skills keep their contents under the key. */
const ANTHROPIC_STORES = /^\/v1\/(messages\/batches|files|skills)(?:\/|$)/;

export function anthropicStoredObjects(rest: string): string | undefined {
  const match = ANTHROPIC_STORES.exec(rest);
  return match ? `${match[1] === 'messages/batches' ? 'message batches' : match[1]} stored at the provider` : undefined;
}

/** Vertex AI resources kept in the project: context caches, batch and tuning jobs, RAG corpora. */
const VERTEX_STORES = /\/(?:cachedContents|batchPredictionJobs|tuningJobs|ragCorpora)(?:\/|$|:)/;

export function vertexStoredObjects(rest: string): string | undefined {
  const match = VERTEX_STORES.exec(rest);
  return match ? `${match[0].replace(/[/:]/g, '')} stored in the project` : undefined;
}
