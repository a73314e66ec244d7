// Every secret of every credential kind (contracts/credential-kinds.ts) travels the whole way a ProxyConfig
// delivers it: a field in the CRD, a reference the operator renders and resolves, a snapshot name the sidecar
// writes to a file, the runtime setting that names the file, and the provider that reads it. A kind or a
// secret added to the table and missed by any of these fails here, naming it.

import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { parseRuntimeConfigPatch } from '../contracts/config-schema.ts';
import { builtInSecrets, BUILT_IN_CREDENTIALS, CREDENTIAL_KIND_NAMES, CREDENTIAL_KINDS, type CredentialKindName } from '../contracts/credential-kinds.ts';
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
