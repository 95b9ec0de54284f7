package policy

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The config/ files made from the bundles are what ConfigFiles says: the
// default bundle list lives in DefaultBundles only (make generate).
func TestConfigFilesAreGenerated(t *testing.T) {
	files, err := ConfigFiles()
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range files {
		got, err := os.ReadFile(filepath.Join("..", filepath.FromSlash(path)))
		if err != nil {
			t.Errorf("%s: %v (run make generate)", path, err)
			continue
		}
		if string(got) != string(want) {
			t.Errorf("%s differs from what policy.ConfigFiles makes (run make generate):\n%s", path, want)
		}
	}
	k := string(files["config/policies/kustomization.yaml"])
	for _, b := range DefaultBundles {
		if !strings.Contains(k, "- "+b+".yaml\n") {
			t.Errorf("the kustomization does not list default bundle %s:\n%s", b, k)
		}
	}
	if strings.Contains(k, "- "+BundleRestricted+".yaml") {
		t.Errorf("the kustomization lists the opt-in bundle %s", BundleRestricted)
	}
	entries, err := os.ReadDir(filepath.Join("..", "config", "policies"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if _, ok := files["config/policies/"+e.Name()]; !ok {
			t.Errorf("config/policies/%s is not generated (make generate removes it)", e.Name())
		}
	}
}
