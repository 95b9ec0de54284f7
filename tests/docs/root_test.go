package docs

import (
	"testing"

	"github.com/agentsandbox/reconciler/tests"
)

func repoRoot(t *testing.T) string {
	t.Helper()
	return tests.RepoRoot()
}
