package sandbox

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
)

// burstSize is more Sandboxes than the controller lets wait for a
// transitional status before it counts as busy (50).
const burstSize = 70

// TestSuspendBurstWritesNoTransitionalStatus suspends more Sandboxes at once
// than the controller counts as a burst, and keeps their Pods terminating
// for longer than three coalescing windows (the hold of a burst before):
// while the burst lasts no Sandbox gets the transitional
// Suspended=False/PodTerminating written, and once the Pods are gone every
// one shows the resting Suspended=True/PodTerminated with Ready
// SandboxSuspended, as the contract requires.
func TestSuspendBurstWritesNoTransitionalStatus(t *testing.T) {
	ns := env.Namespace(t)
	names := make([]string, burstSize)
	for i := range names {
		names[i] = fmt.Sprintf("burst-%d", i)
		create(t, newSandbox(ns, names[i]))
	}
	for _, name := range names {
		playKubelet(t, ns, name)
	}
	for _, name := range names {
		waitCondition(t, ns, name, sandboxv1beta1.ConditionReady, metav1.ConditionTrue, sandboxv1beta1.ReasonDependenciesReady)
	}

	// Every status the Sandboxes show, polled (a status written stays
	// until the next one, seconds later).
	ctx, cancel := context.WithCancel(ctxFor(t))
	var mu sync.Mutex
	seen := map[string]string{} // a Sandbox that showed PodTerminating -> when
	var wg sync.WaitGroup
	wg.Go(func() {
		for ctx.Err() == nil {
			var l sandboxv1beta1.SandboxList
			if err := env.Client.List(ctx, &l, client.InNamespace(ns)); err == nil {
				mu.Lock()
				for i := range l.Items {
					if c := condition(&l.Items[i], sandboxv1beta1.ConditionSuspended); c != nil && c.Reason == sandboxv1beta1.ReasonPodTerminating {
						if _, ok := seen[l.Items[i].Name]; !ok {
							seen[l.Items[i].Name] = time.Now().Format(time.StampMilli)
						}
					}
				}
				mu.Unlock()
			}
			time.Sleep(200 * time.Millisecond)
		}
	})
	defer func() { cancel(); wg.Wait() }()

	suspended := time.Now()
	for _, name := range names {
		update(t, ns, name, func(sb *sandboxv1beta1.Sandbox) {
			sb.Spec.OperatingMode = sandboxv1beta1.SandboxOperatingModeSuspended
		})
	}
	// The Pods terminate (no kubelet removes them) for four quiet windows.
	time.Sleep(time.Until(suspended.Add(20 * time.Second)))
	for _, name := range names {
		playKubeletDeletion(t, ns, name)
	}
	for _, name := range names {
		sb := waitCondition(t, ns, name, sandboxv1beta1.ConditionSuspended, metav1.ConditionTrue, sandboxv1beta1.ReasonPodTerminated)
		if c := condition(sb, sandboxv1beta1.ConditionReady); c == nil || c.Reason != sandboxv1beta1.ReasonSandboxSuspended || c.Message != "Sandbox is suspended" {
			t.Errorf("%s: Ready = %+v once suspended", name, c)
		}
		if c := condition(sb, sandboxv1beta1.ConditionSuspended); c.ObservedGeneration != sb.Generation {
			t.Errorf("%s: Suspended observedGeneration %d, generation %d", name, c.ObservedGeneration, sb.Generation)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) > 0 {
		t.Errorf("%d of %d Sandboxes got the transitional PodTerminating written during the burst: %v", len(seen), burstSize, seen)
	}
}
