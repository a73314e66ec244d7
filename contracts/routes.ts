// The table of routes: which upstream each /proxy/<route>/* prefix reaches, which credential it needs and
// which wire format its responses use. Everything route-specific that is data, not code, lives here.

export const ROUTE_NAMES = [
  'alpha',
  'alpha-compat',
  'beta',
  'gamma',
  'gamma-cloud',
  'gamma-direct',
  'gamma-cloudb',
] as const;
export type RouteName = (typeof ROUTE_NAMES)[number];

/** Provider names as they appear in spans, logs and pricing entries. */
export const PROVIDERS = ['google', 'openai', 'anthropic', 'local'] as const;
export type Provider = (typeof PROVIDERS)[number];

export type CredentialKind = 'google-adc' | 'openai-api-key' | 'anthropic-api-key' | 'aws-sigv4';

/** Response wire format: decides which usage extractor reads the response. */
export type WireFormat = 'gemini' | 'openai' | 'anthropic' | 'bedrock';

export interface RouteSpec {
  readonly name: RouteName;
  readonly provider: Provider;
  readonly credential: CredentialKind;
  readonly format: WireFormat;
  /** Default upstream base URL; `{location}`/`{region}` are filled from the upstream config. */
  readonly defaultBaseUrl: string;
  readonly description: string;
}

export const ROUTES: Readonly<Record<RouteName, RouteSpec>> = {
  alpha: {
    name: 'alpha',
    provider: 'google',
    credential: 'google-adc',
    format: 'gemini',
    defaultBaseUrl: 'https://{location}-aiplatform.googleapis.com',
    description: 'Gemini on Vertex AI, native generateContent API',
  },
  'alpha-compat': {
    name: 'alpha-compat',
    provider: 'google',
    credential: 'google-adc',
    format: 'openai',
    defaultBaseUrl: 'https://{location}-aiplatform.googleapis.com',
    description: 'Vertex AI OpenAI-compatible chat completions surface',
  },
  beta: {
    name: 'beta',
    provider: 'openai',
    credential: 'openai-api-key',
    format: 'openai',
    defaultBaseUrl: 'https://api.openai.com',
    description: 'OpenAI API',
  },
  gamma: {
    name: 'gamma',
    provider: 'anthropic',
    credential: 'google-adc',
    format: 'anthropic',
    defaultBaseUrl: 'https://{location}-aiplatform.googleapis.com',
    description: 'Claude on Vertex AI, reached with the Anthropic Messages API (translated to rawPredict)',
  },
  'gamma-cloud': {
    name: 'gamma-cloud',
    provider: 'anthropic',
    credential: 'google-adc',
    format: 'anthropic',
    defaultBaseUrl: 'https://{location}-aiplatform.googleapis.com',
    description: 'Claude on Vertex AI, native rawPredict / streamRawPredict paths',
  },
  'gamma-direct': {
    name: 'gamma-direct',
    provider: 'anthropic',
    credential: 'anthropic-api-key',
    format: 'anthropic',
    defaultBaseUrl: 'https://api.anthropic.com',
    description: 'Anthropic API',
  },
  'gamma-cloudb': {
    name: 'gamma-cloudb',
    provider: 'anthropic',
    credential: 'aws-sigv4',
    format: 'bedrock',
    defaultBaseUrl: 'https://bedrock-runtime.{region}.amazonaws.com',
    description: 'Claude on AWS Bedrock (InvokeModel), SigV4-signed',
  },
};

export function isRouteName(value: string): value is RouteName {
  return Object.hasOwn(ROUTES, value);
}
