// Package router embeds the sandbox router's ServiceAccount and RBAC
// (rbac.yaml for --transport=direct, portforward/rbac.yaml for what
// --transport=port-forward adds) and the ValidatingAdmissionPolicy that
// narrows its writes to Sandboxes (admission-policy.yaml), and what the
// E2B API adds (e2b/rbac.yaml, and e2b/admission-policy-patch.yaml, which
// AdmissionPolicyE2B applies to the policy as the e2b component's
// kustomize patch does), so that tools running the router outside the
// cluster (kubectl sandbox up, make run) give it exactly the identity,
// rights and limits config/router deploys. It carries the YAML, and no
// logic but that patch.
package router
