package client

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
)

// labelledSandboxes serves one watch of team-a's Sandboxes: it records the
// query, sends events as they are given on its channel, and refuses the
// watch with refuse (0: serves it).
type labelledSandboxes struct {
	refuse int
	events chan map[string]any
	sent   chan struct{} // one value per event written

	mu    sync.Mutex
	query map[string][]string
}

func (l *labelledSandboxes) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != sandboxesPath || r.URL.Query().Get("watch") != "true" {
		http.NotFound(w, r)
		return
	}
	l.mu.Lock()
	l.query = r.URL.Query()
	l.mu.Unlock()
	if l.refuse != 0 {
		writeJSON(w, l.refuse, metav1.Status{Status: metav1.StatusFailure, Code: int32(l.refuse), Reason: metav1.StatusReasonForbidden})
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	w.(http.Flusher).Flush()
	for {
		select {
		case <-r.Context().Done():
			return
		case ev := <-l.events:
			_ = json.NewEncoder(w).Encode(ev)
			w.(http.Flusher).Flush()
			l.sent <- struct{}{}
		}
	}
}

func claimedSandbox(name string, owner *extv1beta1.SandboxClaim) *sandboxv1beta1.Sandbox {
	sb := &sandboxv1beta1.Sandbox{
		TypeMeta: metav1.TypeMeta{APIVersion: sandboxv1beta1.GroupVersion.String(), Kind: "Sandbox"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name, UID: types.UID("uid-" + name), ResourceVersion: "9",
			Labels: map[string]string{sandboxv1beta1.LabelClaimUID: string(owner.UID)}},
	}
	sb.OwnerReferences = []metav1.OwnerReference{{APIVersion: extv1beta1.GroupVersion.String(), Kind: "SandboxClaim",
		Name: owner.Name, UID: owner.UID, Controller: ptr.To(true)}}
	return sb
}

// TestClaimedWatchSeesTheClaimsSandbox: the watch asks for the Sandboxes
// labelled with the claim's UID from the watch cache, and gives the one
// named that the claim controls. A Sandbox carrying the label but
// controlled by someone else (an attacker can write any label), one being
// deleted and one deleted are not given: Create reads those by GET.
func TestClaimedWatchSeesTheClaimsSandbox(t *testing.T) {
	l := &labelledSandboxes{events: make(chan map[string]any), sent: make(chan struct{})}
	srv := httptest.NewServer(l)
	t.Cleanup(srv.Close)
	c, err := New(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	claim := &extv1beta1.SandboxClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "sandbox-claim-abcde", UID: "claim-uid-1"}}
	cw := watchClaimed(ctxFor(t), c.sandboxes, "team-a", claim.UID)
	defer cw.stop()
	send := func(typ string, sb *sandboxv1beta1.Sandbox) {
		t.Helper()
		select {
		case l.events <- map[string]any{"type": typ, "object": sb}:
			<-l.sent
		case <-time.After(10 * time.Second):
			t.Fatal("the watch was not opened")
		}
	}

	ours := claimedSandbox("pool-a", claim)
	send("ADDED", ours)
	other := &extv1beta1.SandboxClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: claim.Name, UID: "someone-elses"}}
	forged := claimedSandbox("pool-b", other) // labelled with our claim's UID, controlled by another
	forged.Labels[sandboxv1beta1.LabelClaimUID] = string(claim.UID)
	send("ADDED", forged)
	going := claimedSandbox("pool-c", claim)
	going.DeletionTimestamp = ptr.To(metav1.Now())
	send("MODIFIED", going)
	gone := claimedSandbox("pool-d", claim)
	send("ADDED", gone)
	send("DELETED", gone)

	eventually(t, "the watch gives pool-a", func() bool { return cw.sandbox(claim, "pool-a") != nil })
	if got := cw.sandbox(claim, "pool-a"); got.UID != ours.UID {
		t.Errorf("pool-a: UID %s; want %s", got.UID, ours.UID)
	}
	for _, name := range []string{"pool-b", "pool-c", "pool-d", "pool-e"} {
		if got := cw.sandbox(claim, name); got != nil {
			t.Errorf("%s: given (%v); want nil", name, got.OwnerReferences)
		}
	}
	l.mu.Lock()
	q := l.query
	l.mu.Unlock()
	if got, want := q["labelSelector"], []string{sandboxv1beta1.LabelClaimUID + "=claim-uid-1"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("labelSelector %v; want %v", got, want)
	}
	if got := q["resourceVersion"]; fmt.Sprint(got) != "[0]" {
		t.Errorf("resourceVersion %v; want [0] (the watch cache)", got)
	}
	var nilWatch *claimedWatch
	if nilWatch.sandbox(claim, "pool-a") != nil {
		t.Error("a nil watch gave a Sandbox")
	}
	nilWatch.stop()
}

// TestClaimedWatchRefused: a caller who may not watch Sandboxes by label
// gets nothing from the watch, at once, and no error: Create reads its
// Sandbox by GET.
func TestClaimedWatchRefused(t *testing.T) {
	l := &labelledSandboxes{refuse: http.StatusForbidden}
	srv := httptest.NewServer(l)
	t.Cleanup(srv.Close)
	c, err := New(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	claim := &extv1beta1.SandboxClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "sandbox-claim-abcde", UID: "claim-uid-1"}}
	cw := watchClaimed(ctxFor(t), c.sandboxes, "team-a", claim.UID)
	select {
	case <-cw.done:
	case <-time.After(10 * time.Second):
		t.Fatal("a refused watch did not end")
	}
	if cw.sandbox(claim, "pool-a") != nil {
		t.Error("a refused watch gave a Sandbox")
	}
	cw.stop()
}
