package bench

import (
	"sort"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
)

// memberSpan is when the bench's watch first saw a pool member and first
// saw it Ready: a refill in flight, from the watch's view.
type memberSpan struct{ seen, ready time.Time }

// RefillOverlap is how a series of claims met the pool's refill: how long
// a new member took from the watch first seeing it to seeing it Ready
// (the refill's chain of writes: the member, its Pod, binding, the Pod's
// and the member's status), and how many of the claims had a member in
// that chain while they were served (from sending the create to Ready).
type RefillOverlap struct {
	MemberReadyMs Quantiles `json:"member_seen_to_ready_ms"`
	Members       int       `json:"members"`
	// ClaimsBesideRefill counts the claims served while a member was on
	// its way to Ready.
	ClaimsBesideRefill int `json:"claims_beside_refill"`
}

// member notes a pool member (a Sandbox a SandboxWarmPool controls) the
// first time the watch sees it and the first time it sees it Ready.
func (k *claimClock) member(sb *sandboxv1beta1.Sandbox, now time.Time) {
	ref := metav1.GetControllerOf(sb)
	if ref == nil || ref.Kind != extv1beta1.WarmPoolKind.Kind {
		return
	}
	span, ok := k.members[sb.Name]
	if !ok {
		span.seen = now
	}
	if span.ready.IsZero() {
		for _, c := range sb.Status.Conditions {
			if c.Type == sandboxv1beta1.ConditionReady && c.Status == metav1.ConditionTrue {
				span.ready = now
			}
		}
	}
	k.members[sb.Name] = span
}

// refillsDuring counts the members on their way to Ready at some time
// between from and to (k.mu held).
func (k *claimClock) refillsDuring(from, to time.Time) int {
	n := 0
	for _, span := range k.members {
		if span.seen.Before(to) && (span.ready.IsZero() || span.ready.After(from)) {
			n++
		}
	}
	return n
}

// firstSent is when the first of the claims named was sent (k.mu held).
func (k *claimClock) firstSent(names []string) time.Time {
	var first time.Time
	for _, name := range names {
		if at := k.sent[name]; !at.IsZero() && (first.IsZero() || at.Before(first)) {
			first = at
		}
	}
	return first
}

// refillOverlap is the RefillOverlap of the claims named (k.mu held):
// the members first seen from the first claim's create on.
func (k *claimClock) refillOverlap(names []string) RefillOverlap {
	first := k.firstSent(names)
	var ro RefillOverlap
	var took []float64
	for _, span := range k.members {
		if span.seen.Before(first) || span.ready.IsZero() {
			continue
		}
		took = append(took, ms(span.ready.Sub(span.seen)))
	}
	sort.Float64s(took)
	ro.Members, ro.MemberReadyMs = len(took), quantilesOf(took)
	for _, name := range names {
		if sent, ready := k.sent[name], k.readyAt[name]; !sent.IsZero() && !ready.IsZero() && k.refillsDuring(sent, ready) > 0 {
			ro.ClaimsBesideRefill++
		}
	}
	return ro
}
