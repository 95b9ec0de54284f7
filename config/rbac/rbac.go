package rbac

import _ "embed"

// ServiceAccount is the YAML of service_account.yaml.
//
//go:embed service_account.yaml
var ServiceAccount []byte

// Roles is the YAML of the generated role.yaml (a ClusterRole and the Role
// in the controller's namespace).
//
//go:embed role.yaml
var Roles []byte

// Bindings is the YAML of role_binding.yaml.
//
//go:embed role_binding.yaml
var Bindings []byte

// SandboxExec is the YAML of sandbox_exec_role.yaml: the ClusterRole
// agent-sandbox-exec (create sandboxes/exec, what the router's
// --auth=tokenreview asks for), aggregated to edit and admin.
//
//go:embed sandbox_exec_role.yaml
var SandboxExec []byte
