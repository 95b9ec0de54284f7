// Package convert is the one place objects change shape: between the API
// versions of our kinds (v1alpha1 and the v1beta1 hub, with the pure
// functions of the versioned packages), for the conversion webhook, the
// admission webhook and the CLI alike; and JSON, the round trip that turns
// a typed object into its apply configuration or back, the way the API
// server sees both. Like everything under api/, it imports only the
// standard library, apimachinery and api/, and never talks to a cluster.
package convert
