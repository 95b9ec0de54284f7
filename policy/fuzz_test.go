package policy

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// FuzzLoad feeds arbitrary YAML (seeded with the bundles and mangled
// expressions) to Load: it must return a set or an error, never panic.
func FuzzLoad(f *testing.F) {
	for _, name := range Bundles() {
		src, _ := Bundle(name)
		f.Add(string(src.Data))
		f.Add(strings.Replace(string(src.Data), "has(", "has((", 1))
	}
	f.Add("apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicy\n")
	f.Add("- a\n- b: [")
	f.Fuzz(func(t *testing.T, data string) {
		start := time.Now()
		_, _ = Load(Source{Name: "fuzz", Data: []byte(data)})
		if d := time.Since(start); d > 10*time.Second {
			t.Fatalf("Load took %s", d)
		}
	})
}

// FuzzCheck evaluates the bundles on arbitrary JSON posing as a sandbox
// Pod: no panic, and evaluation stays within the CEL cost budget (an
// over-budget expression is an error decision, not a hang).
func FuzzCheck(f *testing.F) {
	set, err := Load(mustBundles(f)...)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(`{"spec":{"containers":[{"name":"a","securityContext":{"privileged":true}}]}}`)
	f.Add(`{"spec":{"containers":"not a list","volumes":[{"hostPath":{}}]}}`)
	f.Add(`{"spec":null}`)
	f.Add(`{}`)
	f.Fuzz(func(t *testing.T, data string) {
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON([]byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","labels":{"agents.x-k8s.io/sandbox-name-hash":"x"}}}`)); err != nil {
			t.Fatal(err)
		}
		extra := &unstructured.Unstructured{}
		if err := extra.UnmarshalJSON([]byte(`{"apiVersion":"v1","kind":"Pod",` + strings.TrimPrefix(data, "{"))); err != nil {
			return
		}
		if spec, ok := extra.Object["spec"]; ok {
			u.Object["spec"] = spec
		}
		start := time.Now()
		_ = set.Check(context.Background(), Object{GVR: schema.GroupVersionResource{Version: "v1", Resource: "pods"}, Object: u})
		if d := time.Since(start); d > 10*time.Second {
			t.Fatalf("Check took %s", d)
		}
	})
}

func mustBundles(f *testing.F) []Source {
	var out []Source
	for _, n := range Bundles() {
		src, err := Bundle(n)
		if err != nil {
			f.Fatal(err)
		}
		out = append(out, src)
	}
	return out
}
