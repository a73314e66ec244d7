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

  it('takes the counter store the sidecars count their rate limits in (budgets.store redis), the password only as a Secret', () => {
    const options = parseWebhookOptions(
      [...required, '--namespace', 'x', '--budget-redis-url', 'redis://tollgate-redis.tollgate-system.svc:6379', '--budget-redis-password-secret', 'redis-auth/password'],
      {},
    );
    if (options === 'help') throw new Error('help');
    expect(options.sidecar.budgetStore).toEqual({
      url: 'redis://tollgate-redis.tollgate-system.svc:6379',
      keyPrefix: 'tollgate:budgets',
      passwordSecret: { name: 'redis-auth', key: 'password' },
    });
    const none = parseWebhookOptions([...required, '--namespace', 'x'], {});
    if (none === 'help') throw new Error('help');
    expect(none.sidecar.budgetStore).toBeUndefined();
  });

  it.each([
    [['--budget-redis-url', 'redis://:hunter2@redis:6379'], /--budget-redis-url: carries a password; give it as a Secret with --budget-redis-password-secret NAME\/KEY/],
    [['--budget-redis-url', 'http://redis:6379'], /--budget-redis-url: "http:\/\/redis:6379" is not a redis:\/\/ or rediss:\/\/ URL/],
    [['--budget-redis-url', 'redis://redis:6379', '--budget-redis-password-secret', 'only-a-name'], /--budget-redis-password-secret: "only-a-name" is not NAME\/KEY/],
  ])('refuses the store %j naming the flag', (extra, message) => {
    expect(() => parseWebhookOptions([...required, '--namespace', 'x', ...extra], {})).toThrow(message);
  });

  it('names a missing required option and its variable', () => {
    expect(() => parseWebhookOptions(['--namespace', 'x'], {})).toThrow(new WebhookOptionsError('--sidecar-image (or TOLLGATE_WEBHOOK_SIDECAR_IMAGE) is required'));
  });
});
