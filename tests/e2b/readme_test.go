package e2b

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentsandbox/reconciler/tests"
)

// TestReadmeExample keeps the "Using the E2B SDK" example of docs/sdks.md
// (which tests/docs runs) the program TestMakeRun runs (hello.mjs), pinned
// to the version package.json pins.
func TestReadmeExample(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join(tests.RepoRoot(), "docs", "sdks.md"))
	if err != nil {
		t.Fatal(err)
	}
	hello, err := os.ReadFile(filepath.Join(Dir(), "hello.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "\n## Using the E2B SDK\n")
	if !ok {
		t.Fatal(`docs/sdks.md has no section "## Using the E2B SDK"`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	if !strings.Contains(section, "cat > hello.mjs <<'JS'\n"+string(hello)+"JS\n") {
		t.Errorf("the E2B example of docs/sdks.md is not tests/e2b/hello.mjs as it is:\n%s", hello)
	}
	if !strings.Contains(section, "npm install e2b@"+Version+"\n") {
		t.Errorf("the E2B example of docs/sdks.md does not install e2b@%s", Version)
	}
	pkg, err := os.ReadFile(filepath.Join(Dir(), "package.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(pkg), `"e2b": "`+Version+`"`) {
		t.Errorf("package.json does not pin e2b at exactly %s", Version)
	}
}
