package policy

import (
	"context"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

func TestParseModes(t *testing.T) {
	m, err := ParseModes("runtime-isolation, baseline=warn,restricted=audit")
	if err != nil {
		t.Fatal(err)
	}
	want := Modes{BundleRuntimeIsolation: ModeEnforce, BundleBaseline: ModeWarn, BundleRestricted: ModeAudit}
	if !reflect.DeepEqual(m, want) {
		t.Fatalf("got %v, want %v", m, want)
	}
	if m.String() != "baseline=warn,restricted=audit,runtime-isolation=enforce" {
		t.Errorf("String: %s", m.String())
	}
	if again, err := ParseModes(m.String()); err != nil || !reflect.DeepEqual(again, m) {
		t.Errorf("round trip: %v %v", again, err)
	}
	if m, err := ParseModes(""); err != nil || len(m) != 0 || m.Of(BundleBaseline) != ModeOff {
		t.Errorf("empty: %v %v", m, err)
	}
	for _, bad := range []string{"nope", "baseline=deny", "*=warn", "baseline="} {
		if _, err := ParseModes(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestNamespaceModes(t *testing.T) {
	n := Namespaces{
		Defaults: Modes{BundleRuntimeIsolation: ModeEnforce, BundleBaseline: ModeEnforce},
		Exempt:   []string{"kube-system", "agent-sandbox-system"},
	}
	cases := []struct {
		name     string
		ns       string
		labels   map[string]string
		want     Modes
		problems int
	}{
		{"defaults", "team", nil, Modes{BundleRuntimeIsolation: ModeEnforce, BundleBaseline: ModeEnforce}, 0},
		{"label overrides one bundle", "team", map[string]string{ModeLabel(BundleBaseline): "warn", "other": "x"},
			Modes{BundleRuntimeIsolation: ModeEnforce, BundleBaseline: ModeWarn}, 0},
		{"label turns on an off bundle", "team", map[string]string{ModeLabel(BundleRestricted): "audit"},
			Modes{BundleRuntimeIsolation: ModeEnforce, BundleBaseline: ModeEnforce, BundleRestricted: ModeAudit}, 0},
		{"label turns one off", "team", map[string]string{ModeLabel(BundleRuntimeIsolation): "off"},
			Modes{BundleRuntimeIsolation: ModeOff, BundleBaseline: ModeEnforce}, 0},
		{"a typo enforces", "team", map[string]string{ModeLabel(BundleBaseline): "warning"},
			Modes{BundleRuntimeIsolation: ModeEnforce, BundleBaseline: ModeEnforce}, 1},
		{"unknown bundle is reported", "team", map[string]string{ModeLabelPrefix + "strict": "enforce"},
			Modes{BundleRuntimeIsolation: ModeEnforce, BundleBaseline: ModeEnforce}, 1},
		{"exempt namespaces warn", "kube-system", map[string]string{ModeLabel(BundleRestricted): "enforce", ModeLabel(BundleBaseline): "audit"},
			Modes{BundleRuntimeIsolation: ModeWarn, BundleBaseline: ModeAudit, BundleRestricted: ModeWarn}, 0},
	}
	for _, c := range cases {
		got, problems := n.For(c.ns, c.labels)
		if !reflect.DeepEqual(got, c.want) || len(problems) != c.problems {
			t.Errorf("%s: got %v %q, want %v with %d problems", c.name, got, problems, c.want, c.problems)
		}
	}
	// The defaults are not changed by a namespace's labels.
	if n.Defaults[BundleBaseline] != ModeEnforce {
		t.Errorf("defaults changed: %v", n.Defaults)
	}
}

// TestModesDecide: the same Pod is denied, warned about, audited or not
// checked at all, by the mode of each bundle, set by the loaded defaults
// or by the context; policies not from a bundle keep their bindings'
// actions.
func TestModesDecide(t *testing.T) {
	set, err := LoadConfig(Config{Modes: Modes{BundleRuntimeIsolation: ModeEnforce, BundleBaseline: ModeWarn}})
	if err != nil {
		t.Fatal(err)
	}
	// runc breaks runtime-isolation, privileged baseline, no limits restricted.
	pod := sandboxPod(func(p *corev1.Pod) {
		p.Spec.RuntimeClassName = ptr.To("runc")
		p.Spec.Containers[0].SecurityContext.Privileged = ptr.To(true)
		p.Spec.Containers[0].Resources.Limits = nil
	})
	byBundle := func(ctx context.Context) map[string]Action {
		ds, err := set.CheckAll(ctx, pod)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]Action{}
		for _, d := range ds {
			if prev, ok := out[d.Bundle]; ok && prev != d.Action {
				t.Fatalf("bundle %s decided both %s and %s", d.Bundle, prev, d.Action)
			}
			out[d.Bundle] = d.Action
		}
		return out
	}
	if got, want := byBundle(context.Background()), map[string]Action{BundleRuntimeIsolation: Deny, BundleBaseline: Warn}; !reflect.DeepEqual(got, want) {
		t.Errorf("defaults: got %v, want %v", got, want)
	}
	ctx := WithModes(context.Background(), Modes{BundleRuntimeIsolation: ModeAudit, BundleRestricted: ModeEnforce})
	if got, want := byBundle(ctx), map[string]Action{BundleRuntimeIsolation: Audit, BundleRestricted: Deny}; !reflect.DeepEqual(got, want) {
		t.Errorf("namespace modes: got %v, want %v", got, want)
	}
	if got := byBundle(WithModes(context.Background(), Modes{})); len(got) != 0 {
		t.Errorf("all off: got %v", got)
	}

	// A policy of one's own is not a bundle: its binding decides.
	custom := `apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: no-runc}
spec:
  matchConstraints:
    resourceRules: [{apiGroups: [""], apiVersions: [v1], resources: [pods], operations: [CREATE]}]
  validations:
  - expression: "object.spec.runtimeClassName != 'runc'"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: no-runc}
spec: {policyName: no-runc, validationActions: [Warn]}
`
	b, err := Bundle(BundleBaseline)
	if err != nil {
		t.Fatal(err)
	}
	mixed, err := Config{Modes: Modes{BundleBaseline: ModeEnforce}}.LoadSources([]Source{b, {Name: "mine.yaml", Data: []byte(custom)}})
	if err != nil {
		t.Fatal(err)
	}
	ds, err := mixed.CheckAll(WithModes(context.Background(), Modes{}), pod)
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != 1 || ds[0].Policy != "no-runc" || ds[0].Action != Warn || ds[0].Bundle != "" {
		t.Errorf("custom policy under all-off modes: %v", ds)
	}
	if mixed.Defaults().Of(BundleBaseline) != ModeEnforce || !strings.Contains(mixed.Defaults().String(), "baseline") {
		t.Errorf("defaults: %v", mixed.Defaults())
	}
}
