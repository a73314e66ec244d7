// One model has a different id on every route: `claude-sonnet-4@20250514` (Vertex AI),
// `us.anthropic.claude-sonnet-4-20250514-v1:0` (a Bedrock inference profile), `claude-sonnet-4-20250514`
// (Anthropic API), `google/gemini-2.5-flash` (Vertex's OpenAI surface), `gemini-2.5-flash-001`,
// `gpt-4o-2024-08-06`. normaliseModelId reduces each to the family id the price table is keyed by; entries'
// aliases cover what the rules cannot derive (`claude-sonnet-4.5`, `claude-opus-4-0`).

const SUFFIXES: readonly RegExp[] = [
  /@[\w.-]*$/, // Vertex AI version: @20250514, @001, @latest
  /-v\d+(?::\w+)+$/, // Bedrock version: -v1:0, -v2:0:200k
  /-\d{8}$/, // Anthropic snapshot date
  /-\d{4}-\d{2}-\d{2}$/, // OpenAI snapshot date
  /-(?:preview|exp)(?:-[\d-]+)?$/, // Gemini previews: -preview-05-20, -preview-09-2025, -exp-03-25
  /-latest$/,
  /-\d{3}$/, // Gemini stable revision: -001
];

// A Bedrock cross-region inference profile puts a geography before the provider: us., eu., apac., us-gov., global.
const BEDROCK_PREFIX = /^(?:[a-z]{2,6}(?:-[a-z]+)?\.)?(?:anthropic|amazon|meta|mistral|cohere|ai21|openai|deepseek|qwen)\./;

const BEDROCK_BARE_VERSION = /-v\d+$/;

// A Bedrock embedding model's -vN is its generation, priced apart (amazon.titan-embed-text-v1 and -v2:0); only
// its :N revision is a version.
const BEDROCK_EMBEDDING = /embed/;
const BEDROCK_REVISION = /(-v\d+)(?::\w+)+$/;

export function normaliseModelId(model: string): string {
  let id = model.trim().toLowerCase();
  if (id.includes('%')) {
    try {
      id = decodeURIComponent(id);
    } catch {
      // not URI-encoded after all
    }
  }
  // Resource paths and ARNs: publishers/google/models/x, google/x, arn:…:inference-profile/x
  const slash = id.lastIndexOf('/');
  if (slash !== -1) id = id.slice(slash + 1);
  const bedrock = BEDROCK_PREFIX.test(id);
  id = id.replace(BEDROCK_PREFIX, '');
  // Bedrock ids of models without a dated snapshot end in a bare version (`anthropic.claude-opus-4-6-v1`);
  // only there, since a bare `-vN` can be part of another provider's model name.
  if (bedrock && BEDROCK_EMBEDDING.test(id)) return id.replace(BEDROCK_REVISION, '$1');
  if (bedrock) id = id.replace(BEDROCK_BARE_VERSION, '');
  for (let changed = true; changed;) {
    changed = false;
    for (const suffix of SUFFIXES) {
      const next = id.replace(suffix, '');
      if (next !== id && next.length > 0) {
        id = next;
        changed = true;
      }
    }
  }
  return id;
}
