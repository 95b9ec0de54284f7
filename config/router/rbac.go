package router

import _ "embed"

// RBAC is the YAML of rbac.yaml: the ServiceAccount, ClusterRole and
// ClusterRoleBinding.
//
//go:embed rbac.yaml
var RBAC []byte
