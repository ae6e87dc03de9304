/**
 * RBAC as the SIMULATED API servers evaluate it (the rules of Kubernetes' RBAC authorizer, for the
 * objects the bring-up applies): a request's attributes (verb, API group, resource and subresource,
 * namespace, name) from its method and path, and whether any ClusterRoleBinding, or RoleBinding in
 * the request's namespace, grants the user one of its roles' rules. A rule matches when its
 * apiGroups, resources (`resource/subresource` for a subresource) and verbs name the request's or
 * `*`, and its resourceNames (when any) name the object; a rule with resourceNames never matches a
 * create or a list, as in Kubernetes. Pure: the server passes the RBAC objects it holds.
 */

// biome-ignore lint/suspicious/noExplicitAny: RBAC objects as stored
type Obj = Record<string, any>;

/** Who made a request, as the server authenticated it. */
export interface RequestUser {
  name: string;
  groups: string[];
}

/** What a request does, in RBAC's terms. */
export interface RequestAttributes {
  verb: string;
  apiGroup: string;
  resource: string;
  subresource?: string;
  namespace?: string;
  name?: string;
}

/** The RBAC objects in force. */
export interface RbacObjects {
  clusterRoles: Obj[];
  clusterRoleBindings: Obj[];
  roles: Obj[];
  roleBindings: Obj[];
}

const RESOURCE_PATH =
  /^\/(?:api\/v1|apis\/([^/]+)\/[^/]+)(?:\/namespaces\/([^/]+))?\/([^/]+)(?:\/([^/]+))?(?:\/([^/]+))?$/;

/**
 * The attributes of a resource request; undefined for a non-resource path (discovery: `/api`,
 * `/apis`, `/api/v1`, `/apis/<group>/<version>`), which every authenticated user may read.
 */
export function requestAttributes(
  method: string,
  path: string,
  query: URLSearchParams,
): RequestAttributes | undefined {
  if (/^\/(api|apis)(\/[^/]+){0,2}$/.test(path) && !/^\/api\/v1\/[^/]+$/.test(path)) return undefined;
  const m = RESOURCE_PATH.exec(path);
  if (!m) return undefined;
  const [, group, namespace, resource, name, subresource] = m;
  if (resource === undefined) return undefined;
  const verbs: Record<string, string> = { POST: 'create', PUT: 'update', PATCH: 'patch', DELETE: 'delete' };
  const verb =
    method === 'GET'
      ? name === undefined
        ? query.get('watch') === 'true'
          ? 'watch'
          : 'list'
        : 'get'
      : (verbs[method] ?? method.toLowerCase());
  return {
    verb,
    apiGroup: group ?? '',
    resource,
    ...(subresource === undefined ? {} : { subresource }),
    ...(namespace === undefined ? {} : { namespace }),
    ...(name === undefined ? {} : { name: decodeURIComponent(name) }),
  };
}

function subjectMatches(subject: Obj, user: RequestUser): boolean {
  if (subject?.kind === 'User') return subject.name === user.name;
  if (subject?.kind === 'Group') return user.groups.includes(subject.name);
  if (subject?.kind === 'ServiceAccount')
    return user.name === `system:serviceaccount:${subject.namespace}:${subject.name}`;
  return false;
}

function ruleMatches(rule: Obj, a: RequestAttributes): boolean {
  const has = (list: unknown, value: string) =>
    Array.isArray(list) && (list.includes('*') || list.includes(value));
  const resource = a.subresource === undefined ? a.resource : `${a.resource}/${a.subresource}`;
  if (!has(rule.apiGroups, a.apiGroup) || !has(rule.resources, resource) || !has(rule.verbs, a.verb))
    return false;
  const names: unknown = rule.resourceNames;
  if (!Array.isArray(names) || names.length === 0) return true;
  return a.name !== undefined && a.verb !== 'create' && names.includes(a.name);
}

/**
 * Whether `rbac` allows `user` to do `a`; `reason` names the binding and role that allowed it, or
 * what was asked for when nothing did (the 403 message).
 */
export function authorize(
  user: RequestUser,
  a: RequestAttributes,
  rbac: RbacObjects,
): { allowed: boolean; reason: string } {
  const role = (ref: Obj, namespace?: string): Obj | undefined =>
    ref?.kind === 'ClusterRole'
      ? rbac.clusterRoles.find((r) => r.metadata?.name === ref.name)
      : rbac.roles.find((r) => r.metadata?.name === ref?.name && r.metadata?.namespace === namespace);
  const bindings: Array<[Obj, string | undefined]> = [
    ...rbac.clusterRoleBindings.map((b): [Obj, undefined] => [b, undefined]),
    ...rbac.roleBindings
      .filter((b) => a.namespace !== undefined && b.metadata?.namespace === a.namespace)
      .map((b): [Obj, string] => [b, b.metadata.namespace]),
  ];
  for (const [binding, namespace] of bindings) {
    // A ClusterRoleBinding's role applies everywhere; a RoleBinding's only in its namespace.
    if (!(binding.subjects ?? []).some((s: Obj) => subjectMatches(s, user))) continue;
    const r = role(binding.roleRef, namespace);
    if ((r?.rules ?? []).some((rule: Obj) => ruleMatches(rule, a)))
      return {
        allowed: true,
        reason: `${binding.kind} ${binding.metadata?.name} (${binding.roleRef?.kind} ${binding.roleRef?.name})`,
      };
  }
  const what = `${a.verb} ${a.apiGroup === '' ? '' : `${a.apiGroup}/`}${a.resource}${a.subresource ? `/${a.subresource}` : ''}${a.name ? ` "${a.name}"` : ''}${a.namespace ? ` in namespace ${a.namespace}` : ' at the cluster scope'}`;
  return { allowed: false, reason: `User "${user.name}" cannot ${what}` };
}

/**
 * Why `user` may not make this request (the 403 message), or undefined when `rbac` allows it:
 * `system:masters` may do anything; approving a CSR also needs the `approve` verb on its signer
 * (`signerOf` names the signer of a stored CSR), as in Kubernetes.
 */
export function authorizeRequest(
  user: RequestUser,
  method: string,
  url: URL,
  rbac: RbacObjects,
  signerOf: (csr: string) => string | undefined,
): string | undefined {
  if (user.groups.includes('system:masters')) return undefined;
  const attributes = requestAttributes(method, url.pathname, url.searchParams);
  if (attributes === undefined) return undefined;
  const verdict = authorize(user, attributes, rbac);
  if (!verdict.allowed) return verdict.reason;
  const csr = /^\/apis\/certificates\.k8s\.io\/v1\/certificatesigningrequests\/([^/]+)\/approval$/.exec(
    url.pathname,
  )?.[1];
  const signer = csr === undefined ? undefined : signerOf(csr);
  if (signer === undefined) return undefined;
  const approve = authorize(
    user,
    { verb: 'approve', apiGroup: 'certificates.k8s.io', resource: 'signers', name: signer },
    rbac,
  );
  return approve.allowed ? undefined : approve.reason;
}
