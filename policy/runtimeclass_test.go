package policy

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// The isolating runtime classes are the runtime-isolation bundle's own
// param, in its order, here and in config/policies (what the API server
// enforces natively).
func TestIsolatingRuntimeClasses(t *testing.T) {
	want := []string{"gvisor", "kata", "kata-qemu", "kata-clh", "kata-fc"}
	if got := IsolatingRuntimeClasses(); !slices.Equal(got, want) {
		t.Errorf("IsolatingRuntimeClasses() = %v, want %v", got, want)
	}
	data, err := os.ReadFile(filepath.Join("..", "config", "policies", BundleRuntimeIsolation+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	native, err := runtimeClassesParam(Source{Name: "config/policies", Data: data})
	if err != nil || !slices.Equal(native, want) {
		t.Errorf("config/policies allowlist = %v (%v), want %v", native, err, want)
	}
	if _, err := runtimeClassesParam(Source{Name: "empty", Data: []byte("kind: ConfigMap\nmetadata: {name: other}\n")}); err == nil {
		t.Error("a source without the params ConfigMap gave an allowlist")
	}
}
