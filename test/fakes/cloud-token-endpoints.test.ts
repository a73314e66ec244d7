// The fakes must refuse what the real endpoints refuse, or tests through them would pass on broken clients.
import { afterEach, describe, expect, it } from 'vitest';
import { startFakeAwsSts, startFakeContainerCredentials } from './aws-credential-endpoints.ts';
import { startFakeMetadataServer, startFakeSts } from './google-token-endpoints.ts';

const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  await Promise.all(closers.splice(0).map((close) => close()));
});

describe('fake Google token endpoints', () => {
  it('metadata server refuses requests without Metadata-Flavor: Google', async () => {
    const server = await startFakeMetadataServer();
    closers.push(() => server.close());
    const url = `${server.url}/computeMetadata/v1/instance/service-accounts/default/token`;
    expect((await fetch(url)).status).toBe(403);
    const ok = await fetch(url, { headers: { 'Metadata-Flavor': 'Google' } });
    expect(ok.headers.get('metadata-flavor')).toBe('Google');
    expect(await ok.json()).toMatchObject({ access_token: 'metadata-token-1', token_type: 'Bearer' });
    expect(server.tokenCalls()).toHaveLength(2);
  });

  it('IAM generateAccessToken refuses a bearer token STS did not issue', async () => {
    const sts = await startFakeSts({ subjectToken: 't' });
    closers.push(() => sts.close());
    const res = await fetch(sts.impersonationUrl('sa@p.iam.gserviceaccount.com'), {
      method: 'POST',
      headers: { authorization: 'Bearer made-up', 'content-type': 'application/json' },
      body: JSON.stringify({ scope: ['https://www.googleapis.com/auth/cloud-platform'] }),
    });
    expect(res.status).toBe(401);
  });
});

describe('fake AWS credential endpoints', () => {
  it('container endpoint requires the authorization token when one is configured', async () => {
    const endpoint = await startFakeContainerCredentials({ authorizationToken: 'tok' });
    closers.push(() => endpoint.close());
    expect((await fetch(endpoint.url)).status).toBe(401);
    const ok = await fetch(endpoint.url, { headers: { authorization: 'tok' } });
    expect(await ok.json()).toMatchObject({ AccessKeyId: endpoint.issued[0]?.accessKeyId, Token: endpoint.issued[0]?.sessionToken });
  });

  it('STS refuses another role or token with an XML error', async () => {
    const sts = await startFakeAwsSts({ webIdentityToken: 'jwt', roleArn: 'arn:aws:iam::1:role/r' });
    closers.push(() => sts.close());
    const body = (role: string, token: string) =>
      new URLSearchParams({ Action: 'AssumeRoleWithWebIdentity', Version: '2011-06-15', RoleArn: role, RoleSessionName: 's', WebIdentityToken: token });
    const wrongRole = await fetch(sts.url, { method: 'POST', body: body('arn:aws:iam::1:role/other', 'jwt') });
    expect(wrongRole.status).toBe(403);
    expect(await wrongRole.text()).toContain('<Code>AccessDenied</Code>');
    const wrongToken = await fetch(sts.url, { method: 'POST', body: body('arn:aws:iam::1:role/r', 'other') });
    expect(await wrongToken.text()).toContain('<Code>InvalidIdentityToken</Code>');
    expect(sts.issued).toHaveLength(0);
  });
});
