// A local OIDC issuer to try the central server by hand (docs/central-server.md#try-it-locally), with no
// Google account: it serves discovery and a JWKS like a real issuer, and mints an ID token for any e-mail at
// GET /token?email=… (audience `tollgate` unless ?aud= says otherwise). For tests and demos only.
//
//   ./tollgatew node test/fakes/oidc-issuer-cli.ts [--port 9400]

import { parseArgs } from 'node:util';
import { startOidcIssuer } from './oidc-issuer.ts';

const { values } = parseArgs({ options: { port: { type: 'string', default: '9400' } } });
const issuer = await startOidcIssuer({ port: Number(values.port), mintEndpoint: true });
process.stdout.write(`local OIDC issuer: ${issuer.url}
  discovery: ${issuer.url}/.well-known/openid-configuration
  an ID token: curl -s '${issuer.url}/token?email=alice@example.com'
Ctrl-C stops it.
`);
process.once('SIGINT', () => void issuer.close().then(() => process.exit(0)));
process.once('SIGTERM', () => void issuer.close().then(() => process.exit(0)));
