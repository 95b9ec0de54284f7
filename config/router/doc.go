// Package router embeds the sandbox router's ServiceAccount and RBAC
// (rbac.yaml), so that tools running the router outside the cluster
// (kubectl sandbox up, make run) give it exactly the identity and rights
// config/router deploys. This package only carries the YAML.
package router
