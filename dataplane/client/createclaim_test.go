package client

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
)

const claimsPath = "/apis/extensions.agents.x-k8s.io/v1beta1/namespaces/team-a/sandboxclaims"

// claimsAPI serves claim creates (a name in taken answers 409), watches
// by name (held open until the client ends them; with bindTo set, the
// claim shows bound to that Sandbox and Ready at once) and deletes, and
// records them.
type claimsAPI struct {
	mu      sync.Mutex
	taken   map[string]bool
	posted  []string
	watched map[string]int // name -> watches open now
	opened  []string
	deleted []string
	bindTo  string
	// ready is the Ready condition a read of a claim by name shows.
	ready *metav1.Condition
}

func newClaimsAPI(t *testing.T, taken ...string) (*claimsAPI, *Client) {
	a := &claimsAPI{taken: map[string]bool{}, watched: map[string]int{}}
	for _, n := range taken {
		a.taken[n] = true
	}
	srv := httptest.NewServer(http.HandlerFunc(a.serve))
	t.Cleanup(srv.Close)
	c, err := New(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	return a, c
}

func (a *claimsAPI) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != claimsPath && !strings.HasPrefix(r.URL.Path, claimsPath+"/") {
		writeJSON(w, http.StatusNotFound, metav1.Status{Status: metav1.StatusFailure, Reason: metav1.StatusReasonNotFound, Code: 404})
		return
	}
	switch {
	case r.Method == http.MethodGet && r.URL.Path != claimsPath:
		name := strings.TrimPrefix(r.URL.Path, claimsPath+"/")
		a.mu.Lock()
		cl := &extv1beta1.SandboxClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name, UID: types.UID("uid-" + name), ResourceVersion: "8"}}
		if a.ready != nil {
			cl.Status.Conditions = []metav1.Condition{*a.ready}
		}
		a.mu.Unlock()
		cl.APIVersion, cl.Kind = extv1beta1.GroupVersion.String(), "SandboxClaim"
		writeJSON(w, http.StatusOK, cl)
	case r.Method == http.MethodGet && r.URL.Query().Get("watch") == "true":
		name := strings.TrimPrefix(r.URL.Query().Get("fieldSelector"), "metadata.name=")
		a.mu.Lock()
		a.watched[name]++
		a.opened = append(a.opened, name)
		a.mu.Unlock()
		bindTo := a.bindTo
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		if bindTo != "" {
			bound := boundClaim(bindTo, types.UID("uid-"+name), true)
			bound.Name, bound.ResourceVersion = name, "8"
			bound.APIVersion, bound.Kind = extv1beta1.GroupVersion.String(), "SandboxClaim"
			_ = json.NewEncoder(w).Encode(map[string]any{"type": watch.Modified, "object": bound})
		}
		w.(http.Flusher).Flush()
		<-r.Context().Done()
		a.mu.Lock()
		a.watched[name]--
		a.mu.Unlock()
	case r.Method == http.MethodPost:
		var claim extv1beta1.SandboxClaim
		_ = json.NewDecoder(r.Body).Decode(&claim)
		a.mu.Lock()
		a.posted = append(a.posted, claim.Name)
		taken := a.taken[claim.Name]
		a.mu.Unlock()
		if taken {
			writeJSON(w, http.StatusConflict, apierrors.NewAlreadyExists(extv1beta1.Resource("sandboxclaims"), claim.Name).Status())
			return
		}
		claim.UID, claim.ResourceVersion = types.UID("uid-"+claim.Name), "7"
		writeJSON(w, http.StatusCreated, &claim)
	case r.Method == http.MethodDelete:
		a.mu.Lock()
		a.deleted = append(a.deleted, r.URL.Path)
		a.mu.Unlock()
		writeJSON(w, http.StatusOK, metav1.Status{Status: metav1.StatusSuccess})
	default:
		writeJSON(w, http.StatusMethodNotAllowed, metav1.Status{Status: metav1.StatusFailure, Code: 405})
	}
}

// watchesOpened names the claims a watch was opened on, in order.
func (a *claimsAPI) watchesOpened() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.opened...)
}

func suffixes(t *testing.T, s ...string) {
	old := claimSuffix
	t.Cleanup(func() { claimSuffix = old })
	var mu sync.Mutex
	claimSuffix = func() string {
		mu.Lock()
		defer mu.Unlock()
		next := s[0]
		s = s[1:]
		return next
	}
}

func newClaim() *extv1beta1.SandboxClaim {
	return &extv1beta1.SandboxClaim{ObjectMeta: metav1.ObjectMeta{GenerateName: ClaimGenerateName, Namespace: "team-a"}}
}

// TestCreateClaimMakesItsName: the claim is created under the name the
// client made, with no watch opened on it before or with the create (the
// wait opens its own, from the created version); a name taken already
// (another tenant's claim, say) is made again.
func TestCreateClaimMakesItsName(t *testing.T) {
	a, c := newClaimsAPI(t, "sandbox-claim-taken")
	suffixes(t, "taken", "fresh")
	created, err := c.createClaim(ctxFor(t), newClaim())
	if err != nil {
		t.Fatalf("createClaim: %v", err)
	}
	if created.Name != "sandbox-claim-fresh" || created.GenerateName != ClaimGenerateName || created.UID != "uid-sandbox-claim-fresh" {
		t.Errorf("created %s (generateName %q, uid %s)", created.Name, created.GenerateName, created.UID)
	}
	opened := a.watchesOpened()
	if len(opened) != 0 {
		t.Errorf("watches opened with the create: %v, want none", opened)
	}

	// Names taken every time: the conflict is the answer, after a few.
	a2, c2 := newClaimsAPI(t, "sandbox-claim-a", "sandbox-claim-b", "sandbox-claim-c")
	suffixes(t, "a", "b", "c", "d")
	if _, err := c2.createClaim(ctxFor(t), newClaim()); !apierrors.IsAlreadyExists(err) {
		t.Errorf("every name taken: %v, want AlreadyExists", err)
	}
	if len(a2.posted) != claimNameAttempts {
		t.Errorf("posted %v, want %d attempts", a2.posted, claimNameAttempts)
	}
}

// TestWaitHeedsOnlyItsClaim plays a tenant who made a claim of the same
// name first (or one being deleted): the claim's watch sees it, bound to
// the tenant's Sandbox, and its deletion; the wait takes neither, only
// the claim the create returned.
func TestWaitHeedsOnlyItsClaim(t *testing.T) {
	_, c := newClaimsAPI(t)
	ours := newClaim()
	ours.Name, ours.UID, ours.ResourceVersion = "sandbox-claim-x", "ours", "10"
	theirs := ours.DeepCopy()
	theirs.UID, theirs.ResourceVersion = "theirs", "9"
	theirs.Status.Sandbox.Name = "their-sandbox"
	bound := func(o runtime.Object) bool {
		cl, ok := o.(*extv1beta1.SandboxClaim)
		return ok && claimBound(cl)
	}

	fw := watch.NewFakeWithChanSize(4, false)
	fw.Add(theirs)
	fw.Delete(theirs)
	ourBound := ours.DeepCopy()
	ourBound.ResourceVersion = "11"
	ourBound.Status.Sandbox.Name = "our-sandbox"
	fw.Modify(ourBound)
	got, err := waitFor(ctxFor(t), c.extensions, "sandboxclaims", ours, fw, bound)
	if err != nil {
		t.Fatalf("waitFor: %v", err)
	}
	if cl := got.(*extv1beta1.SandboxClaim); cl.UID != "ours" || cl.Status.Sandbox.Name != "our-sandbox" {
		t.Errorf("waited for claim %s bound to %q, want ours bound to our-sandbox", cl.UID, cl.Status.Sandbox.Name)
	}

	// Our own claim deleted ends the wait.
	gone := watch.NewFakeWithChanSize(1, false)
	gone.Delete(ours.DeepCopy())
	if _, err := waitFor(ctxFor(t), c.extensions, "sandboxclaims", ours, gone, bound); !errors.Is(err, ErrDeleted) {
		t.Errorf("our claim deleted: %v, want ErrDeleted", err)
	}
}
