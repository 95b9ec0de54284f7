package ssa

import (
	"time"

	"k8s.io/apimachinery/pkg/util/resourceversion"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// A managed fields entry names what a manager owns by its time (to the
// second) and its field set, and an atomic field appears in the set as one
// field whatever it holds: two writes of one manager within a second can
// leave the same entry with other values. Nothing else can: a writer under
// another manager that sets a field we own takes or shares its ownership,
// and so changes our entry. So an entry is ambiguous only while one of our
// own writes under its manager may not show in the object the cache gives
// (settled); the extraction and comparison memories key a recent entry
// (entryAmbiguous) by the object's resourceVersion only then. Before, every
// recent entry was, and each of the Pod's status moves after we created it
// (scheduled, running, ready: all within seconds) cost an extraction of the
// whole Pod.

// attempt is what the engine remembers of its writes of an object under
// one of its managers (a writeKey): when the last was sent, how many are
// on their way, the newest resourceVersion one of them gave the object,
// and until when one whose outcome is unknown (it failed: it may have been
// written all the same) keeps the entry ambiguous.
type attempt struct {
	at          time.Time
	inFlight    int
	rv          string
	unknownTill time.Time
	// intent is the digest of what the write that gave rv sent, when it
	// was an apply of ours ("" otherwise): the object at rv is as that
	// write left it, and what we own of it is what was sent (asSent).
	intent string
}

// unsure reports that at now a write of this record may not show in any
// object the cache gives: one is on its way, or one failed within
// entryAmbiguous.
func (a attempt) unsure(now time.Time) bool {
	return a.inFlight > 0 || now.Before(a.unknownTill)
}

// sending records that a write under k is about to be sent, and forgets
// what was remembered of k's extraction and comparison: they were made of
// the object before this write. The returned function records its outcome:
// the resourceVersion the write gave the object (rv) or its error, and
// the digest of what it sent when it was an apply (intent, "" otherwise).
func (e *Engine) sending(k writeKey) func(rv, intent string, err error) {
	e.attempts.Change(k, "", func(a attempt, _ bool) attempt {
		a.at = time.Now()
		a.inFlight++
		return a
	})
	e.extracted.Forget(k)
	e.owned.Forget(k)
	return func(rv, intent string, err error) {
		e.attempts.Change(k, "", func(a attempt, _ bool) attempt {
			a.inFlight = max(a.inFlight-1, 0)
			switch {
			case err != nil || rv == "":
				a.unknownTill = time.Now().Add(entryAmbiguous)
			case a.rv == "" || newer(rv, a.rv):
				a.rv, a.intent = rv, intent
			}
			return a
		})
	}
}

// asSent reports that live is the object exactly as our last write under
// k left it (its resourceVersion is the one that write gave it, and no
// write of ours since is on its way or failed) and that the write sent
// what intent digests: what k's manager owns of it is then what was sent,
// with no extraction. A Service or Pod just made, or a status just
// written, is compared so the first time the cache shows it. A value the
// server stores in another form (a quantity made canonical) or that a
// mutating admission changed is taken for what was sent at that
// resourceVersion; extraction would find it different, and the write sent
// again would change nothing.
func (e *Engine) asSent(k writeKey, live client.Object, intent string) bool {
	a, ok := e.attempts.Recall(k, "")
	return ok && intent != "" && a.intent == intent && !a.unsure(time.Now()) && a.rv != "" &&
		a.rv == live.GetResourceVersion()
}

// newer reports that resourceVersion a is past b; false when they cannot
// be compared.
func newer(a, b string) bool {
	c, err := resourceversion.CompareResourceVersion(a, b)
	return err == nil && c > 0
}

// settled reports that live, as the cache gives it, shows every write of
// ours under k this engine knows of: none is on its way, none failed in
// the last entryAmbiguous, and live is at or past the newest
// resourceVersion one gave it. For entryAmbiguous after its first use the
// engine knows nothing of the writes a process before it made (a restart,
// a new leader), and nothing is settled.
func (e *Engine) settled(k writeKey, live client.Object) bool {
	now := time.Now()
	first := e.firstUse.Load()
	if first == 0 {
		e.firstUse.CompareAndSwap(0, now.UnixNano())
		first = e.firstUse.Load()
	}
	if now.Sub(time.Unix(0, first)) < entryAmbiguous {
		return false
	}
	a, ok := e.attempts.Recall(k, "")
	if !ok {
		return true
	}
	if a.unsure(now) {
		return false
	}
	if a.rv == "" {
		return true
	}
	c, err := resourceversion.CompareResourceVersion(live.GetResourceVersion(), a.rv)
	return err == nil && c >= 0
}

// sentSince reports that a write under k was sent at or after began: what
// was made of the object read before it must not be remembered.
func (e *Engine) sentSince(k writeKey, began time.Time) bool {
	a, ok := e.attempts.Recall(k, "")
	return ok && !a.at.Before(began)
}

// sweepAttempts drops the attempts older than a minute with none on its
// way: only one in the last entryAmbiguous can make an entry ambiguous.
// Every extraction and comparison made before a write was forgotten as it
// was sent (sending), so one dropped here cannot bring one back.
func (e *Engine) sweepAttempts(now time.Time) {
	before := now.Add(-writeAhead)
	e.attempts.Sweep(func(a attempt) bool { return !a.unsure(now) && a.at.Before(before) })
}
