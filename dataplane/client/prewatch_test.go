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
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
)

const claimsPath = "/apis/extensions.agents.x-k8s.io/v1beta1/namespaces/team-a/sandboxclaims"

// claimsAPI serves claim creates (a name in taken answers 409) and watches
// by name (held open until the client ends them), and records both.
type claimsAPI struct {
	mu      sync.Mutex
	taken   map[string]bool
	posted  []string
	watched map[string]int // name -> watches open now
	opened  []string
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
	if r.URL.Path != claimsPath {
		writeJSON(w, http.StatusNotFound, metav1.Status{Status: metav1.StatusFailure, Reason: metav1.StatusReasonNotFound, Code: 404})
		return
	}
	switch {
	case r.Method == http.MethodGet && r.URL.Query().Get("watch") == "true":
		name := strings.TrimPrefix(r.URL.Query().Get("fieldSelector"), "metadata.name=")
		a.mu.Lock()
		a.watched[name]++
		a.opened = append(a.opened, name)
		a.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
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
	default:
		writeJSON(w, http.StatusMethodNotAllowed, metav1.Status{Status: metav1.StatusFailure, Code: 405})
	}
}

func (a *claimsAPI) open(name string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.watched[name]
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

// TestCreateClaimWatchesItsName: the claim's watch is opened with its
// create, under the name the client made; a name taken already (another
// tenant's claim, say) is made again, and its watch ends.
func TestCreateClaimWatchesItsName(t *testing.T) {
	a, c := newClaimsAPI(t, "sandbox-claim-taken")
	suffixes(t, "taken", "fresh")
	created, early, err := c.createClaim(ctxFor(t), newClaim())
	if err != nil {
		t.Fatalf("createClaim: %v", err)
	}
	if created.Name != "sandbox-claim-fresh" || created.GenerateName != ClaimGenerateName || created.UID != "uid-sandbox-claim-fresh" {
		t.Errorf("created %s (generateName %q, uid %s)", created.Name, created.GenerateName, created.UID)
	}
	w := early.take()
	if w == nil {
		t.Fatal("no watch open on the claim's name")
	}
	eventually(t, "the taken name's watch to end", func() bool { return a.open("sandbox-claim-taken") == 0 })
	if n := a.open("sandbox-claim-fresh"); n != 1 {
		t.Errorf("%d watches open on the claim's name, want 1", n)
	}
	w.Stop()
	eventually(t, "the claim's watch to end", func() bool { return a.open("sandbox-claim-fresh") == 0 })

	// Names taken every time: the conflict is the answer, after a few.
	a2, c2 := newClaimsAPI(t, "sandbox-claim-a", "sandbox-claim-b", "sandbox-claim-c")
	suffixes(t, "a", "b", "c", "d")
	if _, _, err := c2.createClaim(ctxFor(t), newClaim()); !apierrors.IsAlreadyExists(err) {
		t.Errorf("every name taken: %v, want AlreadyExists", err)
	}
	if len(a2.posted) != claimNameAttempts {
		t.Errorf("posted %v, want %d attempts", a2.posted, claimNameAttempts)
	}
	eventually(t, "every watch to end", func() bool {
		return a2.open("sandbox-claim-a")+a2.open("sandbox-claim-b")+a2.open("sandbox-claim-c") == 0
	})
}

// TestWaitHeedsOnlyItsClaim plays a tenant who made a claim of the same
// name first (or one being deleted): the early watch sees it, bound to
// the tenant's Sandbox, and its deletion; the wait takes neither, only
// the claim the create returned.
func TestWaitHeedsOnlyItsClaim(t *testing.T) {
	_, c := newClaimsAPI(t)
	ours := newClaim()
	ours.Name, ours.UID, ours.ResourceVersion = "sandbox-claim-x", "ours", "10"
	theirs := ours.DeepCopy()
	theirs.UID, theirs.ResourceVersion = "theirs", "9"
	theirs.Status.Sandbox.Name = "their-sandbox"

	fw := watch.NewFakeWithChanSize(4, false)
	fw.Add(theirs)
	fw.Delete(theirs)
	bound := ours.DeepCopy()
	bound.ResourceVersion = "11"
	bound.Status.Sandbox.Name = "our-sandbox"
	fw.Modify(bound)
	early := &earlyWatch{opened: make(chan struct{}), w: fw}
	close(early.opened)
	got, err := c.waitForClaim(ctxFor(t), ours, early)
	if err != nil {
		t.Fatalf("waitForClaim: %v", err)
	}
	if got.UID != "ours" || got.Status.Sandbox.Name != "our-sandbox" {
		t.Errorf("waited for claim %s bound to %q, want ours bound to our-sandbox", got.UID, got.Status.Sandbox.Name)
	}

	// Our own claim deleted ends the wait.
	gone := watch.NewFakeWithChanSize(1, false)
	gone.Delete(ours.DeepCopy())
	early = &earlyWatch{opened: make(chan struct{}), w: gone}
	close(early.opened)
	if _, err := c.waitForClaim(ctxFor(t), ours, early); !errors.Is(err, ErrDeleted) {
		t.Errorf("our claim deleted: %v, want ErrDeleted", err)
	}
}
