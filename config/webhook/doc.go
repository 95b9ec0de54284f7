// Package webhook embeds the admission webhook configuration (webhook.yaml),
// so that tools running the controller outside the cluster (kubectl sandbox
// up, make run) install the same configuration that config/default deploys.
package webhook
