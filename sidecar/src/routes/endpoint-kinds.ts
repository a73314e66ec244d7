// Which native calls a format can meter. The proxy holds the key, so a call it forwards but cannot price is
// free spending for whoever can reach it: a path a format does not list here is refused before anything is sent
// (403 unmetered_endpoint), unless the route allows unmetered calls explicitly (docs/routes.md). `metered`: the
// answer carries usage the format's extractor reads. `free`: the provider bills nothing for it (model lists,
// token counts, reads of metadata).

/** What a call on a route's native path is, for the rule above; undefined: neither, refused by default. */
export type EndpointKind = 'metered' | 'free';

/** A method and a path pattern (matched against the path after /proxy/<route>, without the query). */
type Rule = readonly [method: string, path: RegExp, kind: EndpointKind];

function kindOf(rules: readonly Rule[], method: string, rest: string): EndpointKind | undefined {
  // A HEAD is the GET without its body: free where the GET is.
  const as = method === 'HEAD' ? 'GET' : method;
  for (const [m, path, kind] of rules) if (m === as && path.test(rest)) return kind;
  return undefined;
}

/**
 * The OpenAI API (route beta). Image variations, batches, fine-tuning, assistants, realtime and the like are not metered.
 * Audio is (ADR 0911): a transcription's answer carries its usage, a speech request's input is counted; so are
 * image generations and edits (ADR 0910): the images an answer carries, a GPT image model's usage.
 */
const OPENAI_RULES: readonly Rule[] = [
  ['POST', /^\/v1\/(chat\/completions|completions|embeddings|responses)$/, 'metered'],
  // A background response (background: true) is charged when a read of it shows its usage (ADR 0913).
  ['GET', /^\/v1\/responses\/[^/]+$/, 'metered'],
  // Batches: reserved from their input file when created, charged at the batch price when their output file is read.
  ['POST', /^\/v1\/batches$/, 'metered'],
  ['GET', /^\/v1\/files\/[^/]+\/content$/, 'metered'],
  ['POST', /^\/v1\/audio\/(transcriptions|translations|speech)$/, 'metered'],
  // Images (ADR 0910): the answer's `data` is counted, a GPT image model's `usage` read.
  ['POST', /^\/v1\/images\/(generations|edits)$/, 'metered'],
  ['GET', /^\/v1\/models(\/[^/]+)?$/, 'free'],
  ['POST', /^\/v1\/(moderations|responses\/input_tokens)$/, 'free'],
  // An upload: OpenAI bills a file when a metered call reads it, never for keeping it (ADR 0912).
  ['POST', /^\/v1\/files$/, 'free'],
  // Reading, updating metadata of, cancelling or deleting what is stored: billed when it was made.
  ['GET', /^\/v1\/(chat\/completions|responses|files|batches|conversations)(\/[^/]+(\/(messages|input_items|items|content))?)?$/, 'free'],
  ['POST', /^\/v1\/(chat\/completions\/[^/]+|responses\/[^/]+\/cancel|batches\/[^/]+\/cancel)$/, 'free'],
  ['DELETE', /^\/v1\/(chat\/completions|responses|files|conversations)\/[^/]+$/, 'free'],
];

export function openAiEndpoint(method: string, rest: string): EndpointKind | undefined {
  return kindOf(OPENAI_RULES, method, rest);
}

/**
 * An OpenAI-compatible API under any prefix (Azure's deployments, Vertex AI's endpoints/openapi, a gateway's
 * path): chat completions, completions, embeddings, OpenAI's audio API (ADR 0911) and its image generations and
 * edits (ADR 0910) are metered, the model
 * list free.
 */
const COMPATIBLE_RULES: readonly Rule[] = [
  ['POST', /\/(chat\/completions|completions|embeddings|audio\/transcriptions|audio\/translations|audio\/speech|images\/generations|images\/edits)$/, 'metered'],
  ['GET', /\/models(\/[^/]+)?$/, 'free'],
];

export function openAiCompatibleEndpoint(method: string, rest: string): EndpointKind | undefined {
  return kindOf(COMPATIBLE_RULES, method, rest);
}

/**
 * Vertex AI's OpenAI-compatible surface (format gemini-vertex-openai, route alpha-compat): chat completions,
 * completions and embeddings, as before audio and images were added to the compatible list: Vertex has no
 * OpenAI-shaped audio or image API there, so those paths are refused, not forwarded for a 404; the model list is free.
 */
const VERTEX_OPENAI_RULES: readonly Rule[] = [
  ['POST', /\/endpoints\/openapi\/(chat\/completions|completions|embeddings)$/, 'metered'],
  ['GET', /\/models(\/[^/]+)?$/, 'free'],
];

export function vertexOpenAiEndpoint(method: string, rest: string): EndpointKind | undefined {
  return kindOf(VERTEX_OPENAI_RULES, method, rest);
}

/** The Anthropic API: Messages and Message Batches; token counts, the model list and the Files API (free at Anthropic) are free. */
const ANTHROPIC_RULES: readonly Rule[] = [
  ['POST', /^\/v1\/messages$/, 'metered'],
  // Message Batches: reserved when submitted, charged at the batch price when their results are read (ADR 0913).
  ['POST', /^\/v1\/messages\/batches$/, 'metered'],
  ['GET', /^\/v1\/messages\/batches\/[^/]+\/results$/, 'metered'],
  ['POST', /^\/v1\/messages\/count_tokens$/, 'free'],
  ['GET', /^\/v1\/models(\/[^/]+)?$/, 'free'],
  ['GET', /^\/v1\/messages\/batches(\/[^/]+)?$/, 'free'],
  ['POST', /^\/v1\/messages\/batches\/[^/]+\/cancel$/, 'free'],
  ['GET', /^\/v1\/files(\/[^/]+(\/content)?)?$/, 'free'],
  ['POST', /^\/v1\/files$/, 'free'],
  ['DELETE', /^\/v1\/(files|messages\/batches)\/[^/]+$/, 'free'],
];

export function anthropicEndpoint(method: string, rest: string): EndpointKind | undefined {
  return kindOf(ANTHROPIC_RULES, method, rest);
}

/**
 * Gemini on Vertex AI (format gemini-vertex): Google's publisher models only, since the route reads usage the
 * way Gemini writes it; a Claude rawPredict sent here would be read as no usage, and free.
 */
const GEMINI_VERTEX_RULES: readonly Rule[] = [
  ['POST', /\/publishers\/google\/models\/[^/:]+:(generateContent|streamGenerateContent)$/, 'metered'],
  // The text embedding models' :predict (the Google Gen AI SDK's embedContent): each prediction's token_count is
  // read (usage/prediction-tokens.ts). The newer Gemini embedding models' :embedContent answers with
  // usageMetadata, read as generateContent's is.
  ['POST', /\/publishers\/google\/models\/(gemini-embedding-|text-embedding-|text-multilingual-embedding-)[^/:]*:predict$/, 'metered'],
  // Imagen's generation models' :predict (ADR 0915): billed per image, its predictions counted as they pass.
  // Other models' :predict (Imagen's editing and upscaling models, anything else) carry nothing read and stay refused.
  ['POST', /\/publishers\/google\/models\/imagen-[\d.]+-(fast-|ultra-)?generate-[^/:]*:predict$/, 'metered'],
  ['POST', /\/publishers\/google\/models\/gemini-embedding-[^/:]*:embedContent$/, 'metered'],
  ['POST', /\/publishers\/google\/models\/[^/:]+:(countTokens|computeTokens)$/, 'free'],
  ['GET', /\/publishers\/google\/models(\/[^/:]+)?$/, 'free'],
];

export function geminiVertexEndpoint(method: string, rest: string): EndpointKind | undefined {
  return kindOf(GEMINI_VERTEX_RULES, method, rest);
}

/** Claude on Vertex AI's own paths (format anthropic-vertex-raw): Anthropic's publisher models only, likewise. */
const CLAUDE_VERTEX_RULES: readonly Rule[] = [
  // Claude's token count is a rawPredict on a model named count-tokens: matched before the metered rawPredict.
  ['POST', /\/publishers\/anthropic\/models\/count-tokens:rawPredict$/, 'free'],
  ['POST', /\/publishers\/anthropic\/models\/[^/:]+:(rawPredict|streamRawPredict)$/, 'metered'],
  ['GET', /\/publishers\/anthropic\/models(\/[^/:]+)?$/, 'free'],
];

export function claudeVertexEndpoint(method: string, rest: string): EndpointKind | undefined {
  return kindOf(CLAUDE_VERTEX_RULES, method, rest);
}

/**
 * Bedrock's runtime: the model invocations, and CountTokens, which Bedrock does not bill (ADR 0912); nothing else is
 * signed either (ADR 1007).
 */
const BEDROCK_RULES: readonly Rule[] = [
  ['POST', /^\/model\/[^/]+\/(invoke|invoke-with-response-stream|converse|converse-stream)$/, 'metered'],
  ['POST', /^\/model\/[^/]+\/count-tokens$/, 'free'],
];

export function bedrockEndpoint(method: string, rest: string): EndpointKind | undefined {
  return kindOf(BEDROCK_RULES, method, rest);
}

/**
 * Ollama's API: its OpenAI-compatible paths are metered (cost 0 on the built-in local route), its own /api/*
 * free to forward only on a route with no credential, which spends nobody's key (http/proxy.ts): a configured
 * ollama route with a key forwards what this list says, like any other.
 */
const OLLAMA_RULES: readonly Rule[] = [
  ['POST', /^\/v1\/(chat\/completions|completions|embeddings)$/, 'metered'],
  ['GET', /^\/v1\/models(\/[^/]+)?$/, 'free'],
  ['GET', /^\/api\/(tags|ps|version)$/, 'free'],
];

export function ollamaEndpoint(method: string, rest: string): EndpointKind | undefined {
  return kindOf(OLLAMA_RULES, method, rest);
}
