// Package policy evaluates CEL policies, written as ValidatingAdmissionPolicy
// YAML, against our objects and the objects rendered from them, with the API
// server's own admission-policy packages (matching, validating, match
// conditions from k8s.io/apiserver), so that a policy judges here as it
// would in the API server; it also validates objects offline against the
// generated CRD schemas and their x-kubernetes-validations.
//
// Rules:
//   - Loading is ours (Load): YAML instead of informers, paramRef resolved
//     among the loaded documents, every expression compiled at load so a bad
//     one fails with its field and column.
//   - What cannot be honoured offline is refused at load, never ignored:
//     namespaceSelector, subresource rules, auditAnnotations (matchPolicy
//     Equivalent matches as Exact). A policy must judge alike in the CLI, the
//     controller and the webhook.
//   - The built-in bundles and config/policies share one list, DefaultBundles;
//     a bundle in another mode has its bindings edited as YAML (InMode),
//     never by replacing text.
//   - Decisions are data (policy, binding, rule, action, message). The
//     package never talks to a cluster.
//   - A set remembers its decisions by what its policies can read of an
//     object (reads.go: worked out from the CEL and the selectors at load;
//     memo.go): objects alike in all of it are judged once. Whatever the
//     analysis cannot follow reads the whole object.
//
// The user's guide is docs/policies.md.
package policy
