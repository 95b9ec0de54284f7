// Package router embeds the sandbox router's ServiceAccount and RBAC
// (rbac.yaml for --transport=direct, portforward/rbac.yaml for what
// --transport=port-forward adds) and the ValidatingAdmissionPolicy that
// narrows its writes to Sandboxes (admission-policy.yaml), and what the
// E2B API adds (e2b/rbac.yaml, e2b/admission-policy.yaml), so that tools
// running the router outside the cluster (kubectl sandbox up, make run)
// give it exactly the identity, rights and limits config/router deploys.
// This package only carries the YAML.
package router
