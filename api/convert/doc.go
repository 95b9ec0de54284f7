// Package convert is the one place objects change shape: between the API
// versions of our kinds (v1alpha1 and the v1beta1 hub, with the pure
// functions of the versioned packages), for the conversion webhook, the
// admission webhook and the CLI alike; JSON, the round trip that turns a
// typed object into its apply configuration or back, the way the API
// server sees both; and Unstructured, the same into an unstructured object
// (for the policy engine and the CLI's output). Like everything under api/, it imports only the
// standard library, apimachinery and api/, and never talks to a cluster.
package convert
