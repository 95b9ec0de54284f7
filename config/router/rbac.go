package router

import (
	_ "embed"
)

// RBAC is the YAML of rbac.yaml: the ServiceAccount, ClusterRole and
// ClusterRoleBinding of the router with --transport=direct.
//
//go:embed rbac.yaml
var RBAC []byte

// RBACPortForward is the YAML of portforward/rbac.yaml: the ClusterRole
// and ClusterRoleBinding --transport=port-forward adds (pods/portforward).
//
//go:embed portforward/rbac.yaml
var RBACPortForward []byte

// AdmissionPolicy is the YAML of admission-policy.yaml: the
// ValidatingAdmissionPolicy and its binding that let the router's
// ServiceAccount change only spec.operatingMode (to Running) and the
// last-activity annotation of Sandboxes.
//
//go:embed admission-policy.yaml
var AdmissionPolicy []byte

// RBACE2B is the YAML of e2b/rbac.yaml: the ClusterRole and
// ClusterRoleBinding the E2B API (--e2b) adds (SandboxClaims, and reading
// SandboxWarmPools).
//
//go:embed e2b/rbac.yaml
var RBACE2B []byte

// AdmissionPolicyPatchE2B is the YAML of e2b/admission-policy-patch.yaml:
// the JSON patch the E2B component makes to AdmissionPolicy (pause may set
// Suspended on a Sandbox a SandboxClaim controls). AdmissionPolicyE2B
// applies it.
//
//go:embed e2b/admission-policy-patch.yaml
var AdmissionPolicyPatchE2B []byte
