// The least the operator needs from the API server, as RBAC objects (for the Helm chart and the tests, which
// run the operator as a user bound to exactly these). Cluster-wide: read ProxyConfigs and Secrets, write
// ProxyConfig status, read pods (their proxy-config annotation), review tokens, record events. In its own
// namespace: its Lease, the Secret holding the generated push-server certificate and the push Service's
// EndpointSlice.

export interface RbacSubject {
  kind: 'ServiceAccount' | 'User';
  name: string;
  /** For ServiceAccount subjects. */
  namespace?: string;
}

export function operatorRbac(opts: { namespace: string; name?: string; subject: RbacSubject }): object[] {
  const name = opts.name ?? 'tollgate-operator';
  const subject = opts.subject.kind === 'User' ? { kind: 'User', apiGroup: 'rbac.authorization.k8s.io', name: opts.subject.name } : opts.subject;
  return [
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRole',
      metadata: { name },
      rules: [
        { apiGroups: ['tollgate.dev'], resources: ['proxyconfigs'], verbs: ['get', 'list', 'watch'] },
        { apiGroups: ['tollgate.dev'], resources: ['proxyconfigs/status'], verbs: ['get', 'patch', 'update'] },
        { apiGroups: [''], resources: ['secrets'], verbs: ['get', 'list', 'watch'] },
        { apiGroups: [''], resources: ['pods'], verbs: ['get'] },
        { apiGroups: ['events.k8s.io'], resources: ['events'], verbs: ['create', 'patch'] },
        { apiGroups: ['authentication.k8s.io'], resources: ['tokenreviews'], verbs: ['create'] },
      ],
    },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRoleBinding',
      metadata: { name },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name },
      subjects: [subject],
    },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'Role',
      metadata: { name, namespace: opts.namespace },
      rules: [
        { apiGroups: ['coordination.k8s.io'], resources: ['leases'], verbs: ['get', 'create', 'update'] },
        { apiGroups: [''], resources: ['secrets'], verbs: ['create', 'update'] },
        // The push Service's EndpointSlice, which the leader points at itself (docs/decisions/0721).
        { apiGroups: ['discovery.k8s.io'], resources: ['endpointslices'], verbs: ['get', 'create', 'update', 'patch'] },
      ],
    },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'RoleBinding',
      metadata: { name, namespace: opts.namespace },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name },
      subjects: [subject],
    },
  ];
}
