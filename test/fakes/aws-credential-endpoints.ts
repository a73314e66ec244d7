// Fake AWS credential endpoints for the SDK's real default chain on loopback: the container credentials
// endpoint (ECS task role, EKS Pod Identity agent) and STS AssumeRoleWithWebIdentity (IRSA). They answer in
// the real wire formats and check what the SDK sends.

import { startRecordingServer, type RecordedCall } from './recording-server.ts';

export type { RecordedCall } from './recording-server.ts';

export interface IssuedCredentials {
  accessKeyId: string;
  secretAccessKey: string;
  sessionToken: string;
  expiration: Date;
}

export interface FakeAwsCredentialEndpoint {
  /** For the container endpoint: the value of AWS_CONTAINER_CREDENTIALS_FULL_URI. For STS: AWS_ENDPOINT_URL_STS. */
  url: string;
  calls: RecordedCall[];
  /** Credentials handed out, in order; the last one is what the SDK should be signing with. */
  issued: IssuedCredentials[];
  /** While failing, credential requests get a 500. */
  setFailing(failing: boolean): void;
  close(): Promise<void>;
}

function issue(issued: IssuedCredentials[], prefix: string, lifetimeMs: number): IssuedCredentials {
  const n = issued.length + 1;
  const credentials = {
    accessKeyId: `${prefix}${String(n).padStart(16, '0')}`,
    secretAccessKey: `fake-secret-${n}-${'x'.repeat(24)}`,
    sessionToken: `fake-session-token-${n}`,
    // Whole seconds, as AWS reports them.
    expiration: new Date(Math.floor((Date.now() + lifetimeMs) / 1000) * 1000),
  };
  issued.push(credentials);
  return credentials;
}

// ---------------------------------------------------------------------------------------------------------
// Container credentials (AWS_CONTAINER_CREDENTIALS_FULL_URI)

export interface FakeContainerCredentialsOptions {
  /** When set, requests must carry it in Authorization (AWS_CONTAINER_AUTHORIZATION_TOKEN). */
  authorizationToken?: string;
  /** Lifetime of each issued credential. */
  lifetimeMs?: number;
}

export async function startFakeContainerCredentials(options: FakeContainerCredentialsOptions = {}): Promise<FakeAwsCredentialEndpoint> {
  const issued: IssuedCredentials[] = [];
  const lifetimeMs = options.lifetimeMs ?? 6 * 3600_000;
  const endpoint = await startRecordingServer(
    (call, res, failing) => {
      if (call.method !== 'GET') {
        res.writeHead(405).end();
        return;
      }
      if (options.authorizationToken !== undefined && call.headers.authorization !== options.authorizationToken) {
        res.writeHead(401, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ code: 'AccessDenied', message: 'invalid authorization token' }));
        return;
      }
      if (failing) {
        res.writeHead(500, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ code: 'InternalError', message: 'fake container credentials endpoint told to fail' }));
        return;
      }
      const credentials = issue(issued, 'ASIACONTAINER', lifetimeMs);
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({
          AccessKeyId: credentials.accessKeyId,
          SecretAccessKey: credentials.secretAccessKey,
          Token: credentials.sessionToken,
          AccountId: '123456789012',
          Expiration: credentials.expiration.toISOString().replace(/\.\d{3}Z$/, 'Z'),
        }),
      );
    },
    { path: '/v1/credentials' },
  );
  return { ...endpoint, issued };
}

// ---------------------------------------------------------------------------------------------------------
// STS AssumeRoleWithWebIdentity (query protocol, XML answer)

export interface FakeStsOptions {
  /** The web identity token the workload holds (AWS_WEB_IDENTITY_TOKEN_FILE content). */
  webIdentityToken: string;
  roleArn: string;
  lifetimeMs?: number;
}

export async function startFakeAwsSts(options: FakeStsOptions): Promise<FakeAwsCredentialEndpoint> {
  const issued: IssuedCredentials[] = [];
  const lifetimeMs = options.lifetimeMs ?? 3600_000;
  const endpoint = await startRecordingServer((call, res, failing) => {
    const form = new URLSearchParams(call.body);
    const fault = (status: number, code: string, message: string) => {
      res.writeHead(status, { 'content-type': 'text/xml' });
      res.end(
        `<ErrorResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><Error><Type>Sender</Type><Code>${code}</Code>` +
          `<Message>${message}</Message></Error><RequestId>fake-request</RequestId></ErrorResponse>`,
      );
    };
    if (call.method !== 'POST' || form.get('Action') !== 'AssumeRoleWithWebIdentity' || form.get('Version') !== '2011-06-15') {
      fault(400, 'InvalidAction', `unexpected ${call.method} Action=${String(form.get('Action'))} Version=${String(form.get('Version'))}`);
      return;
    }
    if (failing) {
      fault(500, 'InternalFailure', 'fake STS told to fail');
      return;
    }
    if (form.get('WebIdentityToken') !== options.webIdentityToken) {
      fault(400, 'InvalidIdentityToken', 'web identity token rejected');
      return;
    }
    if (form.get('RoleArn') !== options.roleArn) {
      fault(403, 'AccessDenied', `not authorized to assume ${String(form.get('RoleArn'))}`);
      return;
    }
    const session = form.get('RoleSessionName') ?? '';
    const credentials = issue(issued, 'ASIAWEBIDENTITY', lifetimeMs);
    res.writeHead(200, { 'content-type': 'text/xml' });
    res.end(`<AssumeRoleWithWebIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">
  <AssumeRoleWithWebIdentityResult>
    <SubjectFromWebIdentityToken>system:serviceaccount:default:app</SubjectFromWebIdentityToken>
    <Audience>sts.amazonaws.com</Audience>
    <AssumedRoleUser>
      <Arn>${options.roleArn.replace(':role/', ':assumed-role/').replace(':iam:', ':sts:')}/${session}</Arn>
      <AssumedRoleId>AROAFAKEROLEID:${session}</AssumedRoleId>
    </AssumedRoleUser>
    <Credentials>
      <SessionToken>${credentials.sessionToken}</SessionToken>
      <SecretAccessKey>${credentials.secretAccessKey}</SecretAccessKey>
      <Expiration>${credentials.expiration.toISOString()}</Expiration>
      <AccessKeyId>${credentials.accessKeyId}</AccessKeyId>
    </Credentials>
    <Provider>oidc.eks.us-east-1.amazonaws.com/id/FAKE</Provider>
  </AssumeRoleWithWebIdentityResult>
  <ResponseMetadata>
    <RequestId>fake-request-${issued.length}</RequestId>
  </ResponseMetadata>
</AssumeRoleWithWebIdentityResponse>`);
  });
  return { ...endpoint, issued };
}
