import { describe, expect, it } from 'vitest';
import { parseOperatorArgs, UsageError } from './options.ts';

const parse = (argv: string[], env: Record<string, string> = {}) => parseOperatorArgs(argv, env, 'host', 42);

describe('parseOperatorArgs', () => {
  it('defaults to controller-runtime lease timings and a self-managed certificate in the operator namespace', () => {
    expect(parse([], { POD_NAMESPACE: 'tg', POD_NAME: 'op-0' })).toEqual({
      help: false,
      namespace: 'tg',
      leaseName: 'tollgate-operator',
      identity: 'op-0',
      grpcHost: '0.0.0.0',
      grpcPort: 8443,
      healthHost: '0.0.0.0',
      healthPort: 8081,
      tls: {
        kind: 'secret',
        namespace: 'tg',
        name: 'tollgate-operator-tls',
        dnsNames: ['tollgate-operator.tg.svc', 'tollgate-operator.tg.svc.cluster.local'],
        ipAddresses: ['127.0.0.1'],
      },
      caConfigMap: 'tollgate-operator-ca',
      leaseDurationMs: 15_000,
      renewDeadlineMs: 10_000,
      retryPeriodMs: 2_000,
      aliasDegradedAfterMs: 180_000,
      logLevel: 'info',
    });
  });

  it('takes certificate files, a kubeconfig and an identity from flags', () => {
    const s = parse(['--tls-cert=c.pem', '--tls-key', 'k.pem', '--kubeconfig', '/k', '--identity', 'me', '--grpc-port', '0'], { KUBECONFIG: '/other' });
    expect(s.tls).toEqual({ kind: 'files', certFile: 'c.pem', keyFile: 'k.pem' });
    expect(s).toMatchObject({ kubeconfig: '/k', identity: 'me', grpcPort: 0, namespace: 'tollgate-system' });
    expect(parse([], {}).identity).toBe('host-42');
    expect(parse(['--health-host=127.0.0.1', '--health-port=0'])).toMatchObject({ healthHost: '127.0.0.1', healthPort: 0 });
  });

  it('publishes the CA sidecars trust in a ConfigMap; with certificate files, the CA is a file too', () => {
    expect(parse(['--ca-config-map=rel-tollgate-operator-ca']).caConfigMap).toBe('rel-tollgate-operator-ca');
    expect(parse(['--tls-cert=c.pem', '--tls-key=k.pem', '--tls-ca=ca.pem']).tls).toEqual({ kind: 'files', certFile: 'c.pem', keyFile: 'k.pem', caFile: 'ca.pem' });
    expect(() => parse(['--tls-ca=ca.pem'])).toThrow(/--tls-ca goes with --tls-cert and --tls-key/);
    expect(() => parse(['--ca-config-map=CA'])).toThrow(/--ca-config-map must be a ConfigMap name \(got "CA"\)/);
  });

  it('publishes the leader endpoint only when it knows its pod IP (flag, else $POD_IP)', () => {
    expect(parse([]).leaderEndpoint).toBeUndefined();
    expect(parse([], { POD_IP: '' }).leaderEndpoint).toBeUndefined();
    expect(parse([], { POD_IP: '10.1.2.3' }).leaderEndpoint).toEqual({ service: 'tollgate-operator', podIP: '10.1.2.3' });
    expect(parse(['--pod-ip=fd00::7', '--push-service=rel-tollgate-operator'], { POD_IP: '10.1.2.3' }).leaderEndpoint).toEqual({
      service: 'rel-tollgate-operator',
      podIP: 'fd00::7',
    });
  });

  it('names its Deployment as the owner of what it creates only when told to', () => {
    expect(parse([]).ownerDeployment).toBeUndefined();
    expect(parse(['--owner-deployment=rel-tollgate-operator']).ownerDeployment).toBe('rel-tollgate-operator');
    expect(() => parse(['--owner-deployment=Operator_1'])).toThrow(/--owner-deployment must be a Deployment name \(got "Operator_1"\)/);
  });

  it('calls a model alias degraded after --alias-degraded-after seconds of fallback', () => {
    expect(parse(['--alias-degraded-after=1.5']).aliasDegradedAfterMs).toBe(1_500);
    expect(() => parse(['--alias-degraded-after=0'])).toThrow(/--alias-degraded-after must be a number of seconds between 0 and 3600 \(got "0"\)/);
  });

  it('keeps the cluster ledger on Redis with --ledger-redis-url, the password only from the environment', () => {
    expect(parse([]).ledgerRedis).toBeUndefined();
    expect(parse(['--ledger-redis-url=redis://tollgate-redis.tollgate-system.svc:6379']).ledgerRedis).toEqual({
      url: 'redis://tollgate-redis.tollgate-system.svc:6379',
      keyPrefix: 'tollgate:budgets',
    });
    expect(
      parseOperatorArgs(['--ledger-redis-url=rediss://store:6380', '--ledger-redis-key-prefix=prod:ledger'], { TOLLGATE_LEDGER_REDIS_PASSWORD: 's3cret' }, 'host', 1).ledgerRedis,
    ).toEqual({ url: 'rediss://store:6380', keyPrefix: 'prod:ledger', passwordEnv: 'TOLLGATE_LEDGER_REDIS_PASSWORD' });
    expect(() => parse(['--ledger-redis-url=redis://:hunter2@store:6379'])).toThrow(/--ledger-redis-url must not contain a password: set \$TOLLGATE_LEDGER_REDIS_PASSWORD/);
    expect(() => parse(['--ledger-redis-url=http://store:6379'])).toThrow(/--ledger-redis-url must start with redis:\/\/ or rediss:\/\/ \(got "http:\/\/store:6379"\)/);
    expect(() => parse(['--ledger-redis-url=redis://store:6379', '--ledger-redis-key-prefix={x}'])).toThrow(/--ledger-redis-key-prefix must be 1 to 64 letters/);
    expect(() => parse(['--ledger-redis-key-prefix=x'])).toThrow(/--ledger-redis-key-prefix goes with --ledger-redis-url/);
  });

  it('names the flag that is wrong', () => {
    expect(() => parse(['--grpc-port', '70000'])).toThrow(/--grpc-port must be a port number/);
    expect(() => parse(['--health-port', 'http'])).toThrow(/--health-port must be a port number 0-65535 \(got "http"\)/);
    expect(() => parse(['--tls-cert', 'c.pem'])).toThrow(/--tls-cert and --tls-key must be given together/);
    expect(() => parse(['--renew-deadline', '20'])).toThrow(/--renew-deadline must be shorter than --lease-duration/);
    expect(() => parse(['--namespace', 'Bad_NS'])).toThrow(/--namespace must be a namespace name/);
    expect(() => parse(['--bogus'])).toThrow(UsageError);
    expect(() => parse(['--log-level', 'loud'])).toThrow(/--log-level must be one of/);
    expect(() => parse(['--pod-ip', '10.0.0.300'])).toThrow(/--pod-ip must be an IPv4 or IPv6 address \(got "10.0.0.300"\)/);
    expect(() => parse([], { POD_IP: 'pod' })).toThrow(/--pod-ip must be an IPv4 or IPv6 address/);
    expect(() => parse(['--pod-ip', '127.0.0.2'])).toThrow(/--pod-ip must be the pod's routable address, not loopback or unspecified \(got "127.0.0.2"\)/);
    expect(() => parse([], { POD_IP: '::' })).toThrow(/not loopback or unspecified/);
    expect(() => parse(['--pod-ip=10.0.0.3', '--push-service=Push_Svc'])).toThrow(/--push-service must be a Service name/);
  });
});
