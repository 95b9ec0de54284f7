package webhook

import _ "embed"

// ValidatingWebhookConfiguration is the YAML of config/webhook/webhook.yaml.
//
//go:embed webhook.yaml
var ValidatingWebhookConfiguration []byte
