package router

import _ "embed"

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
