// Package api is the root of the agent-sandbox API types served by this
// controller. The types live in versioned sub-packages:
//
//   - api/v1beta1: Sandbox (agents.x-k8s.io)
//   - api/extensions/v1beta1: SandboxTemplate, SandboxClaim, SandboxWarmPool
//     (extensions.agents.x-k8s.io)
//
// Packages under api/ import only k8s.io/apimachinery and k8s.io/api (plus,
// for generated apply configurations, client-go's apply configurations).
// They must never import controller-runtime, clients, or anything that talks
// to a cluster: the CLI, the webhooks and render all depend on them.
package api
