import { describe, expect, it } from 'vitest';
import { parseWebhookOptions, WebhookOptionsError } from './webhook-options.ts';

const required = ['--sidecar-image', 'ghcr.io/tollgate/tollgate:0.3.1', '--operator-address', 'op.tollgate.svc:9443', '--operator-ca-file', '/ca.crt'];

describe('parseWebhookOptions', () => {
  it('applies defaults and takes the version from the image tag', () => {
    const options = parseWebhookOptions(required, { POD_NAMESPACE: 'tollgate-system' });
    if (options === 'help') throw new Error('help');
    expect(options).toMatchObject({ port: 9443, namespace: 'tollgate-system', certificateMode: 'self-managed', failurePolicy: 'Ignore' });
    expect(options.sidecar).toMatchObject({ version: '0.3.1', port: 8181, nativeSidecar: 'auto' });
  });

  it('reads TOLLGATE_WEBHOOK_* variables, flags winning', () => {
    const options = parseWebhookOptions([...required, '--port', '8443'], {
      TOLLGATE_WEBHOOK_NAMESPACE: 'tg',
      TOLLGATE_WEBHOOK_PORT: '1',
      TOLLGATE_WEBHOOK_CERT_MODE: 'files',
    });
    if (options === 'help') throw new Error('help');
    expect(options).toMatchObject({ port: 8443, namespace: 'tg', certificateMode: 'files' });
  });

  it.each([
    [['--cert-mode', 'magic'], /--cert-mode: "magic" is not one of self-managed, files/],
    [['--sidecar-cpu-limit', 'lots'], /--sidecar-cpu-limit: "lots" is not a Kubernetes quantity/],
    [['--sidecar-port', '80'], /--sidecar-port: "80" is not a whole number from 1024 to 65535/],
    [['--failure-policy', 'ignore'], /--failure-policy: "ignore" is not one of Ignore, Fail/],
    [['--unknown'], /Unknown option '--unknown'/],
  ])('rejects %j naming the flag', (extra, message) => {
    expect(() => parseWebhookOptions([...required, '--namespace', 'x', ...extra], {})).toThrow(message);
  });

  it('names a missing required option and its variable', () => {
    expect(() => parseWebhookOptions(['--namespace', 'x'], {})).toThrow(new WebhookOptionsError('--sidecar-image (or TOLLGATE_WEBHOOK_SIDECAR_IMAGE) is required'));
  });
});
