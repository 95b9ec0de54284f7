// Package policy evaluates CEL policies, written as ValidatingAdmissionPolicy
// YAML, against our objects and the objects rendered from them, with the
// API server's own admission-policy packages so that a policy judges here
// as it would in the API server; it also validates objects offline against
// the generated CRD schemas and their x-kubernetes-validations.
//
// From k8s.io/apiserver/pkg/admission/plugin/policy and its neighbours:
// matching (match.go) is matching.Matcher, with rules.Matcher inside it
// (operations, groups, versions, resources with "*" and "*/*",
// resourceNames, scope), excludeResourceRules, the object selector (the
// object or, on update, the old object) and matchPolicy; evaluation
// (compile.go) is validating.NewValidator over the plugin's CEL compiler
// and environment (variables, validations, messageExpression, reasons,
// failurePolicy, cost budget), and match conditions are
// matchconditions.Matcher.
//
// What stays ours, and why:
//   - Loading (Load, bind): the plugin's policy source and dispatcher read
//     policies, bindings and params from informers on a live API server;
//     we read YAML, resolve paramRef among the loaded documents, and map a
//     failed validation to the binding's actions or the bundle's mode.
//   - Compile errors: each expression is compiled at load, with the
//     plugin's compiler, so that a bad expression fails the load with its
//     field, index and column; the plugin would compile lazily and only
//     report the error when a request is judged.
//   - Match conditions run ahead of the validator, so that an error in one
//     is reported against no validation (rule -1) rather than mistaken for
//     the policy's only validation's.
//   - namespaceSelector is refused: the library's namespace matcher reads
//     namespace labels through a namespace lister and client of a live API
//     server, which offline checks (the CLI, golden tests) do not have; a
//     policy must judge alike in the CLI, the controller and the webhook.
//   - Subresource rules are refused: only whole objects are checked here,
//     so such a rule would silently never match.
//   - matchPolicy Equivalent matches as Exact: equivalent resources need
//     the API server's resource mapper and conversion of the object.
//   - auditAnnotations are refused: there is no audit log here.
//
// The built-in bundles (bundles.go) and the config/ files made from them
// (ConfigFiles, written by make generate) share one list of default
// bundles, DefaultBundles; a bundle exported in another mode has its
// bindings edited as YAML (InMode), never by replacing text.
//
// Decisions are data (policy, binding, rule, action, message). The package
// must never talk to a cluster.
package policy
