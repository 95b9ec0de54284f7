package bench

import (
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"

	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
)

// EventOverlap is how a timeline's claims met the SandboxAdopted Events of
// other claims: an Event is a write of the API server's like any other,
// and one that lands while a claim is served competes with that claim's
// writes. Whether it does depends on when the Event is sent (the
// controller holds its Events while its own writes are in flight,
// eventgate; the floor with refill sends each one right after its
// claim's status), which these figures show.
type EventOverlap struct {
	// Events counts the SandboxAdopted Events the watch saw about the
	// timeline's claims.
	Events int `json:"events"`
	// ClaimsBesideEvent counts the claims during which (from the create
	// sent to the watch seeing it Ready) the watch saw another claim's
	// SandboxAdopted Event.
	ClaimsBesideEvent int `json:"claims_beside_event"`
	// BesideMs and ApartMs are the sent-to-Ready times of the claims with
	// such an Event and of the others.
	BesideMs Quantiles `json:"beside_event_ms"`
	ApartMs  Quantiles `json:"apart_from_events_ms"`
	// AfterReadyMs is, for each of those Events, how long after its own
	// claim was seen Ready the watch saw it.
	AfterReadyMs Quantiles `json:"after_own_claim_ready_ms"`
}

// adoptedEvent is a SandboxAdopted Event the watch saw: when, and about
// which claim.
type adoptedEvent struct {
	at    time.Time
	claim string
}

// event notes when the watch first saw each SandboxAdopted Event of the
// clock's namespace.
func (k *claimClock) event(obj any) {
	ev, ok := obj.(*eventsv1.Event)
	if !ok || ev.Namespace != k.ns || ev.Reason != sandboxv1beta1.EventSandboxAdopted {
		return
	}
	now := time.Now()
	k.mu.Lock()
	defer k.mu.Unlock()
	if _, ok := k.events[ev.Name]; !ok {
		k.events[ev.Name] = adoptedEvent{at: now, claim: ev.Regarding.Name}
	}
}

// eventOverlap is the EventOverlap of the claims named (k.mu held).
func (k *claimClock) eventOverlap(names []string) EventOverlap {
	first := k.firstSent(names)
	own := make(map[string]bool, len(names))
	for _, name := range names {
		own[name] = true
	}
	var eo EventOverlap
	var after, beside, apart []float64
	var seen []adoptedEvent
	for _, ev := range k.events {
		if ev.at.Before(first) {
			continue
		}
		seen = append(seen, ev)
		if !own[ev.claim] {
			continue
		}
		eo.Events++
		if ready := k.readyAt[ev.claim]; !ready.IsZero() {
			after = append(after, ms(ev.at.Sub(ready)))
		}
	}
	for _, name := range names {
		sent, ready := k.sent[name], k.readyAt[name]
		if sent.IsZero() || ready.IsZero() {
			continue
		}
		took := ms(ready.Sub(sent))
		if besideEvent(seen, name, sent, ready) {
			eo.ClaimsBesideEvent++
			beside = append(beside, took)
		} else {
			apart = append(apart, took)
		}
	}
	eo.AfterReadyMs, eo.BesideMs, eo.ApartMs = quantilesOf(after), quantilesOf(beside), quantilesOf(apart)
	return eo
}

// besideEvent says whether one of events about a claim other than name
// was seen between from and to.
func besideEvent(events []adoptedEvent, name string, from, to time.Time) bool {
	for _, ev := range events {
		if ev.claim != name && ev.at.After(from) && ev.at.Before(to) {
			return true
		}
	}
	return false
}

// TestEventOverlap: a claim counts as beside an Event when another claim's
// SandboxAdopted Event was seen while it was served, never for its own;
// only the timeline's claims' Events are counted and timed after Ready.
func TestEventOverlap(t *testing.T) {
	k, at := threeClaims(230)
	k.events = map[string]adoptedEvent{
		"a.1":     {at: at(210), claim: "a"},   // lands while b is served
		"b.1":     {at: at(235), claim: "b"},   // after b, before c
		"c.1":     {at: at(415), claim: "c"},   // c's own, while c is served
		"other.1": {at: at(-50), claim: "old"}, // before the first claim
	}
	eo := k.eventOverlap([]string{"a", "b", "c"})
	if eo.Events != 3 || eo.ClaimsBesideEvent != 1 {
		t.Fatalf("events %d, claims beside one %d; want 3 and 1", eo.Events, eo.ClaimsBesideEvent)
	}
	if eo.BesideMs.P50 != 30 || eo.ApartMs.P50 != 20 {
		t.Fatalf("beside %v, apart %v; want 30 ms and 20 ms", eo.BesideMs, eo.ApartMs)
	}
	if eo.AfterReadyMs.P99 != 190 {
		t.Fatalf("after own Ready %v; want p99 190 ms (a's Event)", eo.AfterReadyMs)
	}
	if only := k.eventOverlap([]string{"c"}); only.Events != 1 || only.ClaimsBesideEvent != 0 {
		t.Fatalf("c alone: %+v; want its own Event only, beside none", only)
	}
}

// threeClaims is a claimClock of claims a, b and c sent at 0, 200 and
// 400 ms, Ready 20 ms later but b, Ready at bReady ms, and the clock's at.
func threeClaims(bReady int) (*claimClock, func(msec int) time.Time) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(msec int) time.Time { return t0.Add(time.Duration(msec) * time.Millisecond) }
	return &claimClock{
		sent:    map[string]time.Time{"a": at(0), "b": at(200), "c": at(400)},
		readyAt: map[string]time.Time{"a": at(20), "b": at(bReady), "c": at(420)},
	}, at
}
