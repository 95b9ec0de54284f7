package ssa

import (
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
)

// recentSecond is the second of the entries of recentPod.
var recentSecond = metav1.NewTime(time.Now().Truncate(time.Second))

// recentPod is podOwnedBy with its entry stamped this second (an
// ambiguous entry) and resourceVersion rv.
func recentPod(image, rv string) *corev1.Pod {
	p := podOwnedBy("mgr", "u1", image, 0)
	at := recentSecond
	p.ManagedFields[0].Time = &at
	p.ResourceVersion = rv
	return p
}

// oldEngine is an engine first used a minute ago: it knows every write of
// its managers since.
func oldEngine() *Engine {
	e := New(nil, "mgr", "mgr-status")
	e.firstUse.Store(time.Now().Add(-time.Minute).UnixNano())
	return e
}

func extractImage(t *testing.T, e *Engine, p *corev1.Pod, calls *int) string {
	t.Helper()
	got, err := Extract(e, "Pod", p, "mgr", "", countedExtractPod(calls))
	if err != nil {
		t.Fatal(err)
	}
	return *got.Spec.Containers[0].Image
}

// TestRecentEntryKeyedByVersionOnlyUntilSettled: a recent entry of ours is
// remembered without the object's resourceVersion once the cache shows
// every write of ours (the Pod's status moving on costs no extraction),
// and with it while one may not show: on its way, past its
// resourceVersion, failed, or before the engine could know (its first
// entryAmbiguous).
func TestRecentEntryKeyedByVersionOnlyUntilSettled(t *testing.T) {
	e := oldEngine()
	k := objectKey("Pod", "mgr", "ns", "box")
	calls := 0
	if got := extractImage(t, e, recentPod("img:1", "10"), &calls); got != "img:1" || calls != 1 {
		t.Fatalf("first extraction: %s after %d calls", got, calls)
	}
	// The kubelet moves the Pod's status: a new resourceVersion, the same
	// entry of ours.
	for _, rv := range []string{"11", "12"} {
		if got := extractImage(t, e, recentPod("img:1", rv), &calls); got != "img:1" || calls != 1 {
			t.Errorf("at %s, settled: %s after %d calls; want img:1 from memory", rv, got, calls)
		}
	}

	// A write of ours within the same second leaves the same entry with
	// another image. While it is on its way, every version is judged apart.
	done := e.sending(k)
	if got := extractImage(t, e, recentPod("img:1", "12"), &calls); got != "img:1" || calls != 2 {
		t.Errorf("write on its way: %s after %d calls; want a new extraction", got, calls)
	}
	done("20", "", nil)
	if got := extractImage(t, e, recentPod("img:1", "13"), &calls); got != "img:1" || calls != 3 {
		t.Errorf("cache behind the write: %s after %d calls; want a new extraction", got, calls)
	}
	// The cache shows it: the same entry, the new image, never the old
	// extraction.
	if got := extractImage(t, e, recentPod("img:2", "20"), &calls); got != "img:2" || calls != 4 {
		t.Errorf("write shown: %s after %d calls; want img:2 extracted", got, calls)
	}
	if got := extractImage(t, e, recentPod("img:2", "21"), &calls); got != "img:2" || calls != 4 {
		t.Errorf("settled again: %s after %d calls; want img:2 from memory", got, calls)
	}

	// A write that failed may have been written all the same.
	e.sending(k)("", "", errors.New("timeout"))
	if got := extractImage(t, e, recentPod("img:3", "30"), &calls); got != "img:3" || calls != 5 {
		t.Errorf("after a failed write: %s after %d calls; want img:3 extracted", got, calls)
	}
	if got := extractImage(t, e, recentPod("img:3", "31"), &calls); calls != 6 {
		t.Errorf("within entryAmbiguous of a failed write: %s after %d calls; want every version extracted", got, calls)
	}

	// A young engine knows nothing of a process before it.
	young := New(nil, "mgr", "mgr-status")
	n := 0
	for _, rv := range []string{"40", "41"} {
		extractImage(t, young, recentPod("img:4", rv), &n)
	}
	if n != 2 {
		t.Errorf("young engine: %d extractions, want one per version", n)
	}
}

// TestWriteForgetsWhatWasMadeBefore: what was remembered of an object is
// forgotten as a write of ours is sent, and what was made of it before a
// write is not remembered after (sentSince), so an extraction or a
// comparison made before the write is never taken for the object after it.
func TestWriteForgetsWhatWasMadeBefore(t *testing.T) {
	e := oldEngine()
	k := objectKey("Pod", "mgr", "ns", "box")
	p := recentPod("img:1", "10")
	desired, err := corev1ac.ExtractPod(p, "mgr")
	if err != nil {
		t.Fatal(err)
	}
	calls := 0
	extract := func() (any, error) { calls++; return corev1ac.ExtractPod(p, "mgr") }
	if same, err := e.ownsDesired(k, p, desired, extract); err != nil || !same || calls != 1 {
		t.Fatalf("first comparison: same %v, %d calls, %v", same, calls, err)
	}
	if same, _ := e.ownsDesired(k, p, desired, extract); !same || calls != 1 {
		t.Fatalf("remembered comparison: same %v, %d calls", same, calls)
	}
	e.sending(k)("11", "", nil)
	if e.owned.Len() != 0 || e.extracted.Len() != 0 {
		t.Errorf("a write kept %d comparisons and %d extractions made before it", e.owned.Len(), e.extracted.Len())
	}
	changed := recentPod("img:2", "11") // the same entry, another image
	p = changed
	if same, _ := e.ownsDesired(k, changed, desired, extract); same || calls != 2 {
		t.Errorf("after our write: same %v after %d calls; want the new image compared", same, calls)
	}

	began := time.Now()
	e.sending(k)("12", "", nil)
	if !e.sentSince(k, began) {
		t.Error("a write sent after a comparison began is not seen")
	}
	if e.sentSince(k, time.Now().Add(time.Millisecond)) {
		t.Error("a write sent before a comparison began is taken for one after")
	}
}

// TestAttemptsSweptAndForgotten: attempts go with the object, and those a
// minute old with none on its way are swept.
func TestAttemptsSweptAndForgotten(t *testing.T) {
	e := oldEngine()
	e.sending(objectKey("Pod", "mgr", "ns", "a"))("1", "", nil)
	pending := objectKey("Pod", "mgr", "ns", "b")
	e.sending(pending) // on its way
	e.sending(e.statusKey("Sandbox", "ns", "c"))("2", "", nil)
	e.sweepAttempts(time.Now().Add(2 * time.Minute))
	if n := e.attempts.Len(); n != 1 {
		t.Errorf("after the sweep %d attempts, want the one on its way", n)
	}
	e.Forget("Pod", "ns", "b")
	if n := e.Remembered("ns"); n != 0 {
		t.Errorf("after Forget the engine remembers %d entries", n)
	}
}

// TestObjectAsSentNeedsNoExtraction: the object at the resourceVersion our
// apply gave it, that apply having sent what is desired, is compared
// without extraction; at another resourceVersion, for another intent, or
// with a write of ours on its way or failed, it is extracted.
func TestObjectAsSentNeedsNoExtraction(t *testing.T) {
	e := oldEngine()
	k := objectKey("Pod", "mgr", "ns", "box")
	desired, err := corev1ac.ExtractPod(recentPod("img:1", "10"), "mgr")
	if err != nil {
		t.Fatal(err)
	}
	calls := 0
	compare := func(live *corev1.Pod, want any) bool {
		t.Helper()
		e.owned.Forget(k)
		same, err := e.ownsDesired(k, live, want, func() (any, error) { calls++; return corev1ac.ExtractPod(live, "mgr") })
		if err != nil {
			t.Fatal(err)
		}
		return same
	}
	e.sending(k)("10", IntentOf(desired), nil)
	if !compare(recentPod("img:1", "10"), desired) || calls != 0 {
		t.Errorf("as sent: %d extractions, want none", calls)
	}
	if !compare(recentPod("img:1", "11"), desired) || calls != 1 {
		t.Errorf("changed since (by someone else): %d extractions, want 1", calls)
	}
	other, _ := corev1ac.ExtractPod(recentPod("img:2", "10"), "mgr")
	if compare(recentPod("img:1", "10"), other) || calls != 2 {
		t.Errorf("another intent: %d extractions, want 2 and a difference", calls)
	}
	done := e.sending(k)
	if !compare(recentPod("img:1", "10"), desired) || calls != 3 {
		t.Errorf("a write on its way: %d extractions, want 3", calls)
	}
	done("", "", errors.New("timeout"))
	if !compare(recentPod("img:1", "10"), desired) || calls != 4 {
		t.Errorf("after a failed write: %d extractions, want 4", calls)
	}
}
