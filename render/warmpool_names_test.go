package render

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
)

func namesPool() (*extv1beta1.SandboxWarmPool, *extv1beta1.SandboxTemplate) {
	pool := &extv1beta1.SandboxWarmPool{ObjectMeta: metav1.ObjectMeta{Name: "pool", Namespace: "team", UID: "uid-pool"},
		Spec: extv1beta1.SandboxWarmPoolSpec{Replicas: ptr.To[int32](1), TemplateRef: extv1beta1.SandboxTemplateRef{Name: "tpl"}}}
	tmpl := &extv1beta1.SandboxTemplate{ObjectMeta: metav1.ObjectMeta{Name: "tpl", Namespace: "team"}}
	tmpl.Spec.PodTemplate.Spec.Containers = append(tmpl.Spec.PodTemplate.Spec.Containers, corev1.Container{Name: "main", Image: "busybox"})
	return pool, tmpl
}

// created are the names of the members a plan creates.
func created(t *testing.T, in WarmPoolPlanInputs) []string {
	t.Helper()
	plan, err := PlanWarmPool(in)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range plan.Steps {
		if s.Action == ActionCreate {
			names = append(names, s.Name)
		}
	}
	return names
}

// TestMemberNamesNeverRepeat: a pool whose one member is claimed and then
// deleted, again and again, names each new member anew (the suffix source
// is drawn afresh each reconcile, as the controller's is): a name never
// comes back once its sandbox is gone, so a handle to the old one can only
// find "not found".
func TestMemberNamesNeverRepeat(t *testing.T) {
	pool, tmpl := namesPool()
	seen := map[string]int{}
	for pass := range 500 {
		// The last member was claimed, and its claim deleted: its name is
		// free again and the pool has no member.
		names := created(t, WarmPoolPlanInputs{WarmPoolInputs: WarmPoolInputs{Pool: pool, Template: tmpl},
			Suffix: SeededSuffixes(fmt.Sprint("reconcile-", pass))})
		if len(names) != 1 {
			t.Fatalf("pass %d: created %v, want one member", pass, names)
		}
		if first, ok := seen[names[0]]; ok {
			t.Fatalf("pass %d named its member %s, the name of pass %d's", pass, names[0], first)
		}
		seen[names[0]] = pass
	}
}

// TestMemberNamesAvoidTakenAndPending: a suffix whose name a Sandbox or Pod
// holds, or a member created moments ago has, is passed over; a source
// that gives nothing but taken names makes no member rather than loop.
func TestMemberNamesAvoidTakenAndPending(t *testing.T) {
	pool, tmpl := namesPool()
	pool.Spec.Replicas = ptr.To[int32](2)
	suffixes := []string{"bbbbb", "ccccc", "ddddd", "fffff"}
	in := WarmPoolPlanInputs{WarmPoolInputs: WarmPoolInputs{Pool: pool, Template: tmpl},
		Pending: []string{"pool-ccccc"}, Taken: func(n string) bool { return n == "pool-bbbbb" },
		Suffix: func(i int) string { return suffixes[i%len(suffixes)] }}
	if got := created(t, in); len(got) != 1 || got[0] != "pool-ddddd" {
		t.Errorf("created %v, want [pool-ddddd]", got)
	}
	in.Suffix = func(int) string { return "bbbbb" }
	if got := created(t, in); len(got) != 0 {
		t.Errorf("created %v with only a taken name to give, want none", got)
	}
	in.Suffix = nil
	if _, err := PlanWarmPool(in); err == nil {
		t.Error("a plan that creates members without a suffix source: no error")
	}
}
