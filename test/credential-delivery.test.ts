// Every secret of every credential kind (contracts/credential-kinds.ts) travels the whole way a ProxyConfig
// delivers it: a field in the CRD, a reference the operator renders and resolves, a snapshot name the sidecar
// writes to a file, the runtime setting that names the file, and the provider that reads it. A kind or a
// secret added to the table and missed by any of these fails here, naming it. An endpoint's own key (ADR 0008)
// travels the same way, under `route.<route>.<endpoint>.<role>`.

import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { parseRuntimeConfigPatch } from '../contracts/config-schema.ts';
import {
  builtInSecrets,
  BUILT_IN_CREDENTIAL_IDS,
  BUILT_IN_CREDENTIALS,
  CREDENTIAL_KIND_NAMES,
  CREDENTIAL_KINDS,
  type CredentialDefinition,
  type CredentialKindName,
} from '../contracts/credential-kinds.ts';
import { endpointCredentialDefinition } from '../contracts/route-endpoints.ts';
import { ROUTE_NAMES, ROUTES } from '../contracts/routes.ts';
import type { SchemaNode } from '../crds/crd-schema.ts';
import { PROXY_CONFIG_CRD } from '../crds/proxy-config.ts';
import { referencedSecrets, render, resolveCredentials } from '../operator/src/render.ts';
import { builtInDefinition, createCredentialProvider } from '../sidecar/src/auth/credential-provider.ts';
import { SnapshotCache } from '../sidecar/src/config/snapshot-cache.ts';

const logger = pino({ level: 'silent' });
const spec = PROXY_CONFIG_CRD.versions[0]!.schema.properties!.spec!;

/** Settings a kind needs besides its secrets, so that the route is valid. */
const REQUIRED: Partial<Record<CredentialKindName, Record<string, string>>> = { 'aws-sigv4': { service: 'bedrock', region: 'eu-west-1' } };

async function deliver(rendered: ReturnType<typeof render>, values: Record<string, string>) {
  const secrets = (name: string) => ({ data: Object.fromEntries(Object.entries(values).map(([key, value]) => [key, Buffer.from(value).toString('base64')])), name });
  const resolved = resolveCredentials(rendered.credentialRefs, secrets);
  if (!resolved.ok) throw new Error(resolved.message);
  const cache = new SnapshotCache(mkdtempSync(join(tmpdir(), 'tollgate-delivery-')), logger);
  return cache.prepare({ version: 'v1', source: 'ns/default', configJson: JSON.stringify(rendered.patch), credentials: resolved.values });
}

describe('a configured route’s credential, for every kind and every secret of it', () => {
  const routeCredential = spec.properties!.routes!.items!.properties!.credential!;

  it('the CRD names exactly the kinds of the table', () => {
    expect(routeCredential.properties!.kind!.enum).toEqual(CREDENTIAL_KIND_NAMES);
  });

  for (const kind of CREDENTIAL_KIND_NAMES) {
    const roles = Object.entries(CREDENTIAL_KINDS[kind].secrets);
    it(`${kind}: ${roles.length === 0 ? 'takes no secret' : roles.map(([role]) => role).join(', ')} from a Secret, through the operator, to the file the provider reads`, async () => {
      const credential: Record<string, unknown> = { kind, ...REQUIRED[kind] };
      for (const [role] of roles) {
        expect(routeCredential.properties![role], `spec.routes[].credential.${role} in the CRD`).toMatchObject({ tsType: 'SecretKeyRef' } satisfies Partial<SchemaNode>);
        credential[role] = { secretName: 'route-keys', key: role };
      }
      // aws-sigv4 signs only Bedrock model invocations, so it belongs to the bedrock format (ADR 1007).
      const format = kind === 'aws-sigv4' ? 'bedrock' : 'openai-chat';
      const rendered = render({ routes: [{ name: 'acme', format, baseUrl: 'https://llm.acme.example', credential: credential as never }] });
      expect(rendered.credentialRefs.map((ref) => ref.name).sort()).toEqual(roles.map(([role]) => `route.acme.${role}`).sort());
      if (roles.length > 0)
        expect(referencedSecrets({ routes: [{ name: 'acme', format, baseUrl: 'https://x.example', credential: credential as never }] })).toContain('route-keys');

      const values = Object.fromEntries(roles.map(([role]) => [role, `${role}-value-${kind}`]));
      const prepared = await deliver(rendered, values);
      const definition = prepared.patch.routes![0]!.credential as unknown as Record<string, unknown>;
      for (const [role, field] of roles) {
        expect(typeof definition[field], `routes[0].credential.${field}`).toBe('string');
        expect(readFileSync(definition[field] as string, 'utf8')).toBe(values[role]);
      }
      // The provider is built from the delivered definition, and an api-key one sends the delivered key.
      const provider = createCredentialProvider(prepared.patch.routes![0]!.credential, {
        id: 'route:acme',
        label: 'API key of route acme',
        fileSetting: 'its file',
        upstream: () => undefined,
        logger,
        env: {},
      });
      try {
        if (kind === 'api-key') {
          const req = { method: 'POST', url: new URL('https://llm.acme.example/v1/chat/completions'), headers: {}, body: null };
          await provider.apply(req);
          expect(req.headers).toEqual({ authorization: `Bearer ${values.apiKey}` });
        }
        if (kind === 'aws-sigv4') {
          const req = {
            method: 'POST',
            url: new URL('https://bedrock-runtime.eu-west-1.amazonaws.com/model/m/invoke'),
            headers: {} as Record<string, string>,
            body: Buffer.from('{}'),
          };
          await provider.apply(req);
          expect(req.headers.authorization).toContain(`Credential=${values.accessKeyId}/`);
          expect(req.headers['x-amz-security-token']).toBe(values.sessionToken);
        }
      } finally {
        provider.close();
      }
    });
  }
});

describe('the built-in credentials, every secret of each', () => {
  for (const { id, role, secret } of builtInSecrets()) {
    it(`${id}.${role}: the CRD field, the snapshot name ${secret.snapshot}, the setting credentials.${secret.setting}, the provider's definition`, async () => {
      const credential = BUILT_IN_CREDENTIALS[id] as { crdField?: string; grouped?: boolean };
      const field = credential.crdField!;
      expect(spec.properties!.credentials!.properties![field], `spec.credentials.${field} in the CRD`).toBeDefined();
      // Every secret of a grouped reference is sent (optional ones named), so a pair is delivered whole.
      const ref = credential.grouped
        ? Object.fromEntries([['secretName', 'keys'], ...Object.keys(BUILT_IN_CREDENTIALS[id].secrets).map((r) => [`${r}Key`, r])])
        : { secretName: 'keys', key: role };
      const rendered = render({ credentials: { [field]: ref } });
      expect(rendered.credentialRefs.map((r) => r.name)).toContain(secret.snapshot);
      const values = Object.fromEntries(Object.keys(BUILT_IN_CREDENTIALS[id].secrets).map((r) => [r, `${r}-value`]));
      const prepared = await deliver(rendered, values);
      const file = (prepared.patch.credentials as Record<string, string> | undefined)?.[secret.setting];
      expect(file, `credentials.${secret.setting}`).toBeDefined();
      expect(readFileSync(file!, 'utf8')).toBe(`${role}-value`);
      // The runtime validator takes the setting, and the built-in provider's definition reads the file.
      expect(parseRuntimeConfigPatch({ credentials: prepared.patch.credentials }).credentials).toEqual(prepared.patch.credentials);
      const definition = builtInDefinition(id, prepared.patch.credentials!) as unknown as Record<string, unknown>;
      expect(definition[CREDENTIAL_KINDS[BUILT_IN_CREDENTIALS[id].definition.kind].secrets[role]!]).toBe(file);
    });
  }
});

/** What a provider built for the definition sends: the delivered key (api-key) or the delivered key id (SigV4); others are not called. */
async function sends(definition: CredentialDefinition, values: Record<string, string>): Promise<void> {
  const provider = createCredentialProvider(definition, {
    id: 'route:acme/second',
    label: 'an endpoint',
    fileSetting: 'its file',
    upstream: () => ({ region: 'eu-west-1' }),
    logger,
    env: {},
  });
  try {
    if (definition.kind === 'api-key') {
      const req = { method: 'POST', url: new URL('https://llm.acme.example/v1/chat/completions'), headers: {} as Record<string, string>, body: null };
      await provider.apply(req);
      expect(req.headers[definition.header]).toBe(`${definition.prefix}${values.apiKey}`);
    }
    if (definition.kind === 'aws-sigv4') {
      const req = {
        method: 'POST',
        url: new URL('https://bedrock-runtime.eu-west-1.amazonaws.com/model/m/invoke'),
        headers: {} as Record<string, string>,
        body: Buffer.from('{}'),
      };
      await provider.apply(req);
      expect(req.headers.authorization).toContain(`Credential=${values.accessKeyId}/`);
      expect(req.headers['x-amz-security-token']).toBe(values.sessionToken);
    }
  } finally {
    provider.close();
  }
}

describe('an endpoint’s own key, for every kind and every secret of it', () => {
  const endpointCredential = spec.properties!.routes!.items!.properties!.endpoints!.items!.properties!.credential!;

  for (const kind of CREDENTIAL_KIND_NAMES.filter((k) => Object.keys(CREDENTIAL_KINDS[k].secrets).length > 0)) {
    const roles = Object.entries(CREDENTIAL_KINDS[kind].secrets);
    it(`a configured route's endpoint, ${kind}: ${roles.map(([role]) => role).join(', ')} from a Secret to the endpoint's files and the provider built for it`, async () => {
      const credential: Record<string, unknown> = {};
      for (const [role] of roles) {
        expect(endpointCredential.properties![role], `spec.routes[].endpoints[].credential.${role} in the CRD`).toMatchObject({
          tsType: 'SecretKeyRef',
        } satisfies Partial<SchemaNode>);
        credential[role] = { secretName: 'endpoint-keys', key: `second-${role}` };
      }
      const format = kind === 'aws-sigv4' ? 'bedrock' : 'openai-chat';
      const route = {
        name: 'acme',
        format,
        baseUrl: 'https://llm.acme.example',
        credential: { kind, ...REQUIRED[kind] },
        endpoints: [{ name: 'first' }, { name: 'second', credential }],
      };
      const rendered = render({ routes: [route as never] });
      expect(rendered.credentialRefs.map((ref) => ref.name).sort()).toEqual(roles.map(([role]) => `route.acme.second.${role}`).sort());
      expect(referencedSecrets({ routes: [route as never] })).toContain('endpoint-keys');

      const values = Object.fromEntries(roles.map(([role]) => [`second-${role}`, `${role}-of-the-second-endpoint`]));
      const prepared = await deliver(rendered, values);
      const [first, second] = prepared.patch.routes![0]!.endpoints!;
      expect(first, 'an endpoint without its own key uses the route’s').toEqual({ name: 'first' });
      for (const [role, field] of roles) {
        const file = (second!.credential as Record<string, string> | undefined)?.[field];
        expect(typeof file, `routes[0].endpoints[1].credential.${field}`).toBe('string');
        expect(readFileSync(file!, 'utf8')).toBe(`${role}-of-the-second-endpoint`);
      }
      const delivered = Object.fromEntries(roles.map(([role]) => [role, `${role}-of-the-second-endpoint`]));
      await sends(endpointCredentialDefinition(prepared.patch.routes![0]!.credential, second!.credential), delivered);
    });
  }

  for (const id of BUILT_IN_CREDENTIAL_IDS.filter((i) => Object.keys(BUILT_IN_CREDENTIALS[i].secrets).length > 0)) {
    const route = ROUTE_NAMES.find((name) => ROUTES[name].credential === id)!;
    const kind = BUILT_IN_CREDENTIALS[id].definition.kind;
    const roles = Object.entries(CREDENTIAL_KINDS[kind].secrets);
    it(`a built-in route's endpoint, ${route} (${id}): ${roles.map(([role]) => role).join(', ')} from a Secret to the endpoint's files`, async () => {
      const crd = spec.properties!.upstreams!.properties![route]!.properties!.endpoints!.items!.properties!.credential!;
      expect(Object.keys(crd.properties!), `spec.upstreams.${route}.endpoints[].credential in the CRD`).toEqual(roles.map(([role]) => role));
      const credential = Object.fromEntries(roles.map(([role]) => [role, { secretName: 'endpoint-keys', key: role }]));
      const rendered = render({ upstreams: { [route]: { endpoints: [{ name: 'second', credential }] } } });
      expect(rendered.credentialRefs.map((ref) => ref.name).sort()).toEqual(roles.map(([role]) => `route.${route}.second.${role}`).sort());
      expect(referencedSecrets({ upstreams: { [route]: { endpoints: [{ name: 'second', credential }] } } })).toEqual(['endpoint-keys']);

      const values = Object.fromEntries(roles.map(([role]) => [role, `${role}-of-${route}-second`]));
      const prepared = await deliver(rendered, values);
      const endpoint = (prepared.patch.upstreams as Record<string, { endpoints: { credential?: Record<string, string> }[] }>)[route]!.endpoints[0]!;
      for (const [role, field] of roles) expect(readFileSync(endpoint.credential![field]!, 'utf8')).toBe(`${role}-of-${route}-second`);
      // The route's header and prefix (Anthropic's x-api-key, OpenAI's Bearer), the endpoint's key.
      await sends(endpointCredentialDefinition(builtInDefinition(id, {}), endpoint.credential), values);
    });
  }

  it('a key of another kind than the route’s is refused by the operator, naming the field', () => {
    expect(() => render({ upstreams: { beta: { endpoints: [{ name: 'second', credential: { serviceAccount: { secretName: 'k', key: 'sa' } } as never }] } } })).toThrow(
      /^upstreams\.beta\.endpoints\[0\]\.credential\.serviceAccount is not a secret of the route's credential kind api-key \(expected one of: apiKey\)/,
    );
    const route = {
      name: 'acme',
      format: 'openai-chat',
      baseUrl: 'https://llm.acme.example',
      credential: { kind: 'none' },
      endpoints: [{ name: 'a', credential: { apiKey: { secretName: 'k', key: 'a' } } }],
    };
    expect(() => render({ routes: [route as never] })).toThrow(
      /^routes\[0\]\.endpoints\[0\]\.credential\.apiKey is not a secret of the route's credential kind none \(it takes no key\)/,
    );
  });

  it('files of different routes and endpoints never share a name, though names may contain dashes', () => {
    const cache = new SnapshotCache(mkdtempSync(join(tmpdir(), 'tollgate-delivery-')), logger);
    const files = ['route.a-b.c.apiKey', 'route.a.b-c.apiKey', 'route.a-b-c.apiKey', 'route.a.b.apiKey'].map((name) => cache.credentialFile(name));
    expect(files.every((file) => file !== undefined)).toBe(true);
    expect(new Set(files).size).toBe(4);
  });
});
