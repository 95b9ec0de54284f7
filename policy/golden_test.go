package policy

import (
	"context"
	"os"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	"github.com/agentsandbox/reconciler/render"
	"github.com/agentsandbox/reconciler/tests/golden"
)

// TestGoldenDecisions snapshots, for every golden Sandbox case, the
// decisions of all built-in bundles on the Sandbox and what it renders.
func TestGoldenDecisions(t *testing.T) {
	set := loadBundles(t, Bundles()...)
	for _, c := range golden.Cases(t, "sandbox") {
		t.Run(c.Name, func(t *testing.T) {
			var sb sandboxv1beta1.Sandbox
			if err := yaml.UnmarshalStrict(c.Read(t, "sandbox.yaml"), &sb); err != nil {
				t.Fatal(err)
			}
			if sb.Namespace == "" {
				sb.Namespace = "default"
			}
			sb.UID = types.UID("5f0d7c2e-0000-4000-8000-000000000001")
			sb.APIVersion, sb.Kind = sandboxv1beta1.GroupVersion.String(), "Sandbox"
			desired, err := render.Sandbox(render.SandboxInputs{Sandbox: &sb, ServiceExists: true, Defaults: goldenDefaults(t, c)})
			if err != nil {
				t.Fatal(err)
			}
			objs := []any{&sb}
			for _, c := range desired.Children() {
				objs = append(objs, c.Object)
			}
			ds, err := set.CheckAll(context.Background(), objs...)
			if err != nil {
				t.Fatal(err)
			}
			if ds == nil {
				ds = []Decision{}
			}
			golden.AssertYAML(t, c.Path("policy.yaml"), ds)
		})
	}
}

// goldenDefaults are the defaults of a golden Sandbox case: the default
// runtime class its observed.yaml gives (the cluster's isolating
// RuntimeClass), none without one.
func goldenDefaults(t *testing.T, c golden.Case) render.Defaults {
	t.Helper()
	data, err := os.ReadFile(c.Path("observed.yaml"))
	if os.IsNotExist(err) {
		return render.Defaults{}
	} else if err != nil {
		t.Fatal(err)
	}
	var obs struct {
		DefaultRuntimeClass string `json:"defaultRuntimeClass"`
	}
	if err := yaml.Unmarshal(data, &obs); err != nil {
		t.Fatal(err)
	}
	return render.Defaults{RuntimeClassName: obs.DefaultRuntimeClass}
}
