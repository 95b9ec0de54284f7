package bench

import (
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
	// Events counts the SandboxAdopted Events the watch saw from the
	// first claim's create on.
	Events int `json:"events"`
	// ClaimsBesideEvent counts the claims during which (from the create
	// sent to the watch seeing it Ready) the watch saw another claim's
	// SandboxAdopted Event.
	ClaimsBesideEvent int `json:"claims_beside_event"`
	// BesideMs and ApartMs are the sent-to-Ready times of the claims with
	// such an Event and of the others.
	BesideMs Quantiles `json:"beside_event_ms"`
	ApartMs  Quantiles `json:"apart_from_events_ms"`
	// AfterReadyMs is, for each Event, how long after its own claim was
	// seen Ready the watch saw it.
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
	var first time.Time
	for _, name := range names {
		if at := k.sent[name]; !at.IsZero() && (first.IsZero() || at.Before(first)) {
			first = at
		}
	}
	var eo EventOverlap
	var after, beside, apart []float64
	var seen []adoptedEvent
	for _, ev := range k.events {
		if ev.at.Before(first) {
			continue
		}
		eo.Events++
		seen = append(seen, ev)
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
