package policy

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/agentsandbox/reconciler/render"
)

// The baseline bundle refuses, on any sandbox Pod (so on Sandboxes,
// templates, pool members and claims alike), every label or annotation key
// a claim may not set because a container runtime reads it: the CEL list
// stays equal to render's. The seccomp and AppArmor annotations are judged
// by their values (their own rules), not refused outright.
func TestBaselineRefusesRuntimeKeys(t *testing.T) {
	set := loadBundles(t, BundleBaseline)
	prefixes, domains := render.RuntimeKeyPrefixes()
	var keys []string
	for _, p := range prefixes {
		keys = append(keys, p+"x")
	}
	for _, d := range domains {
		keys = append(keys, "cpu-quota."+d, d+"/x", "x."+d+"/y")
	}
	keys = append(keys, "IO.KataContainers.config")
	valueJudged := func(k string) bool {
		return k == "seccomp.security.alpha.kubernetes.io/pod" || strings.HasPrefix(k, "container.seccomp.security.alpha.kubernetes.io/") ||
			strings.HasPrefix(k, "container.apparmor.security.beta.kubernetes.io/")
	}
	for _, k := range keys {
		for _, label := range []bool{false, true} {
			p := sandboxPod(func(p *corev1.Pod) {
				if label {
					p.Labels[k] = "x"
				} else {
					p.Annotations = map[string]string{k: "x"}
				}
			})
			ds, err := set.CheckAll(context.Background(), p)
			if err != nil {
				t.Fatal(err)
			}
			if valueJudged(k) && label {
				if len(ds) != 0 {
					t.Errorf("label %s: %v, want admitted (the kubelet reads only the annotation)", k, ds)
				}
				continue
			}
			if len(ds) != 1 {
				t.Errorf("%s (label %v): %d decisions %v, want 1", k, label, len(ds), ds)
				continue
			}
			want := "read are not allowed"
			if valueJudged(k) {
				want = "may only name"
			}
			if !strings.Contains(ds[0].Message, want) || !strings.Contains(ds[0].Message, strings.ToLower(k)) && !valueJudged(k) {
				t.Errorf("%s (label %v): %q, want %q naming the key", k, label, ds[0].Message, want)
			}
		}
	}
	// What merely looks alike, and safe seccomp/AppArmor values, pass.
	ok := sandboxPod(func(p *corev1.Pod) {
		p.Labels["example.com/io.katacontainers.note"] = "x"
		p.Annotations = map[string]string{"notcrio.io/x": "y", "sidecar.istio.io/inject": "false",
			"container.apparmor.security.beta.kubernetes.io/agent": "runtime/default",
			"seccomp.security.alpha.kubernetes.io/pod":             "runtime/default"}
	})
	if ds, err := set.CheckAll(context.Background(), ok); err != nil || len(ds) != 0 {
		t.Errorf("look-alike keys: %v %v, want admitted", ds, err)
	}
}
