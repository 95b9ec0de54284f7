package e2b

import (
	"testing"

	"github.com/agentsandbox/reconciler/dataplane/e2b"
	"github.com/agentsandbox/reconciler/dataplane/envd"
)

// TestEnvdVersionsAgree: the router reports the envd version the runtime
// serves, so the SDK turns on exactly the features that are there (stdin,
// closeStdin, octet-stream uploads; not 0.6.2's file metadata).
func TestEnvdVersionsAgree(t *testing.T) {
	if e2b.DefaultEnvdVersion != envd.Version {
		t.Fatalf("the router reports envdVersion %s by default; the runtime's envd serves %s", e2b.DefaultEnvdVersion, envd.Version)
	}
}
