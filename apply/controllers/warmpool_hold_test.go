package controllers

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	"github.com/agentsandbox/reconciler/render"
)

// holdPool is a pool of three whose shown status is what render gives
// for its members.
func holdPool(members ...*sandboxv1beta1.Sandbox) *extv1beta1.SandboxWarmPool {
	p := &extv1beta1.SandboxWarmPool{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "pool-uid", Generation: 1},
		Spec:       extv1beta1.SandboxWarmPoolSpec{Replicas: ptr.To(int32(3)), TemplateRef: extv1beta1.SandboxTemplateRef{Name: "t"}},
	}
	shown := render.WarmPoolStatus(render.WarmPoolStatusInputs{Pool: p, Members: members, Now: metav1.Now()})
	p.Status = extv1beta1.SandboxWarmPoolStatus{
		Replicas: *shown.Status.Replicas, ReadyReplicas: *shown.Status.ReadyReplicas,
		Selector: *shown.Status.Selector, ObservedGeneration: *shown.Status.ObservedGeneration,
		Conditions: conditionsOf(shown.Status.Conditions),
	}
	return p
}

// TestWarmPoolStatusHold: a status that only counts members on their way
// back to the pool's size waits StatusHold at most, counted from the
// first one held; a full pool, a pool over its size, a new generation, a
// problem and a first status are written at once.
func TestWarmPoolStatusHold(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	r := &WarmPoolReconciler{StatusHold: time.Second}
	a, b, c := member("a", "p", true), member("b", "p", true), member("c", "p", true)
	full := holdPool(a, b, c)
	desired := func(p *extv1beta1.SandboxWarmPool, members ...*sandboxv1beta1.Sandbox) time.Duration {
		t.Helper()
		d := render.WarmPoolStatus(render.WarmPoolStatusInputs{Pool: p, Members: members, Grace: time.Minute, Now: metav1.NewTime(now)})
		return r.statusHold(p, d, now)
	}

	// A claim took c: two left, both Ready. Then the pool made d.
	if w := desired(full, a, b); w != time.Second {
		t.Fatalf("a member fewer: held %v, want 1s", w)
	}
	now = now.Add(300 * time.Millisecond)
	d := member("d", "p", false)
	d.CreationTimestamp = metav1.NewTime(now)
	if w := desired(full, a, b, d); w != 700*time.Millisecond {
		t.Fatalf("a new member not Ready yet: held %v, want the rest of the hold, 700ms", w)
	}
	// d is Ready: the pool is full again, and that is written (as it
	// was, nothing is sent) at once.
	if w := desired(full, a, b, member("d", "p", true)); w != 0 {
		t.Fatalf("full again: held %v, want 0", w)
	}
	// The next take holds afresh; one that stays short past the hold is
	// written.
	if w := desired(full, a, b); w != time.Second {
		t.Fatalf("the next take: held %v, want a fresh 1s", w)
	}
	now = now.Add(time.Second)
	if w := desired(full, a, b); w != 0 {
		t.Fatalf("short past the hold: held %v, want 0", w)
	}

	// Statuses written at once.
	now = now.Add(time.Minute)
	over := holdPool(a, b)
	if w := desired(over, a, b, c, member("d", "p", true)); w != 0 {
		t.Fatalf("more members than wanted: held %v, want 0", w)
	}
	newer := full.DeepCopy()
	newer.Generation = 2
	if w := desired(newer, a, b); w != 0 {
		t.Fatalf("a new generation: held %v, want 0", w)
	}
	first := full.DeepCopy()
	first.Status = extv1beta1.SandboxWarmPoolStatus{}
	if w := desired(first, a, b); w != 0 {
		t.Fatalf("the first status: held %v, want 0", w)
	}
	slow := member("s", "p", false)
	slow.CreationTimestamp = metav1.NewTime(now.Add(-2 * time.Minute))
	if w := desired(full, a, b, slow); w != 0 {
		t.Fatalf("a member not Ready past the grace period (Progressing False): held %v, want 0", w)
	}
	none := &WarmPoolReconciler{StatusHold: -1}
	if w := none.statusHold(full, render.WarmPoolStatus(render.WarmPoolStatusInputs{Pool: full, Members: []*sandboxv1beta1.Sandbox{a, b}, Now: metav1.NewTime(now)}), now); w != 0 {
		t.Fatalf("StatusHold negative: held %v, want 0", w)
	}
	if n := r.Remembered("ns"); n != 0 {
		t.Fatalf("%d things remembered of the pool once nothing is held, want 0", n)
	}
}
