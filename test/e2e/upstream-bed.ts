// Every upstream the seven routes reach, faked on loopback, plus the cloud token endpoint the real
// google-auth-library fetches ADC tokens from; and the config and environment that point a proxy at them.

import { startFakeMetadataServer, type FakeMetadataServer } from '../fakes/google-token-endpoints.ts';
import { startFakeUpstream, type FakeUpstream } from '../fakes/llm-upstream.ts';

export const OPENAI_KEY = 'sk-openai-proxy-key';
export const ANTHROPIC_KEY = 'sk-ant-proxy-key';
export const AWS = { accessKeyId: 'AKIDPROXYTEST', secretAccessKey: 'proxy-test-secret-key', region: 'us-east-1' };
export const PROJECT = 'tollgate-test-project';

export interface UpstreamBed {
  vertex: FakeUpstream;
  openai: FakeUpstream;
  anthropic: FakeUpstream;
  bedrock: FakeUpstream;
  metadata: FakeMetadataServer;
  /** Config YAML pointing every route at its fake; `extra` is appended verbatim. */
  configYaml(extra?: string): string;
  env: NodeJS.ProcessEnv;
  reset(): void;
  close(): Promise<void>;
}

export async function startUpstreamBed(): Promise<UpstreamBed> {
  const [vertex, openai, anthropic, bedrock, metadata] = await Promise.all([
    startFakeUpstream('vertex'),
    startFakeUpstream('openai', { expectApiKey: OPENAI_KEY }),
    startFakeUpstream('anthropic', { expectApiKey: ANTHROPIC_KEY }),
    startFakeUpstream('bedrock', { aws: AWS }),
    startFakeMetadataServer({ projectId: PROJECT }),
  ]);
  return {
    vertex,
    openai,
    anthropic,
    bedrock,
    metadata,
    configYaml: (extra = '') => `
upstreams:
  alpha: { baseUrl: "${vertex.url}", project: ${PROJECT}, location: us-central1 }
  alpha-compat: { baseUrl: "${vertex.url}", project: ${PROJECT}, location: us-central1 }
  beta: { baseUrl: "${openai.url}" }
  gamma: { baseUrl: "${vertex.url}", project: ${PROJECT}, location: us-east5 }
  gamma-cloud: { baseUrl: "${vertex.url}", project: ${PROJECT}, location: us-east5 }
  gamma-direct: { baseUrl: "${anthropic.url}" }
  gamma-cloudb: { baseUrl: "${bedrock.url}", region: ${AWS.region} }
storage:
  kind: sqlite
  path: spans.db
${extra}`,
    env: {
      GCE_METADATA_HOST: metadata.host,
      OPENAI_API_KEY: OPENAI_KEY,
      ANTHROPIC_API_KEY: ANTHROPIC_KEY,
      AWS_ACCESS_KEY_ID: AWS.accessKeyId,
      AWS_SECRET_ACCESS_KEY: AWS.secretAccessKey,
      AWS_REGION: AWS.region,
    },
    reset() {
      for (const fake of [vertex, openai, anthropic, bedrock]) fake.reset();
    },
    async close() {
      await Promise.all([vertex.close(), openai.close(), anthropic.close(), bedrock.close(), metadata.close()]);
    },
  };
}
