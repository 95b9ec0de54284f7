package router

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// fakeAPI answers TokenReviews (token "alice-token" is alice, "down" fails)
// and SubjectAccessReviews (alice may create sandboxes/exec in team),
// counting them.
type fakeAPI struct {
	reviews, accesses atomic.Int64
	revoked           atomic.Bool // alice-token no longer authenticates
	// holdTokens and holdAccesses, when set, hold each review until closed.
	holdTokens, holdAccesses chan struct{}
	lastAccess               atomic.Pointer[authorizationv1.SubjectAccessReviewSpec]
}

func (f *fakeAPI) clientset() *fake.Clientset {
	cs := fake.NewClientset()
	cs.PrependReactor("create", "tokenreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		f.reviews.Add(1)
		if f.holdTokens != nil {
			<-f.holdTokens
		}
		tr := a.(k8stesting.CreateAction).GetObject().(*authenticationv1.TokenReview)
		switch tr.Spec.Token {
		case "down":
			return true, nil, errors.New("connection refused")
		case "alice-token":
			if f.revoked.Load() {
				break
			}
			tr.Status = authenticationv1.TokenReviewStatus{Authenticated: true, Audiences: tr.Spec.Audiences,
				User: authenticationv1.UserInfo{Username: "alice", UID: "alice-uid", Groups: []string{"devs"}}}
		case "bob-token":
			tr.Status = authenticationv1.TokenReviewStatus{Authenticated: true, Audiences: tr.Spec.Audiences,
				User: authenticationv1.UserInfo{Username: "bob", UID: "bob-uid", Groups: []string{"devs"}}}
		}
		return true, tr, nil
	})
	cs.PrependReactor("create", "subjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		f.accesses.Add(1)
		if f.holdAccesses != nil {
			<-f.holdAccesses
		}
		sar := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview)
		spec := sar.Spec
		f.lastAccess.Store(&spec)
		ra := sar.Spec.ResourceAttributes
		exec := ra.Namespace == "team" && ra.Verb == "create" &&
			ra.Group == "agents.x-k8s.io" && ra.Resource == "sandboxes" && ra.Subresource == "exec"
		// alice may exec into any Sandbox of team; bob, as a Role with
		// resourceNames gives it, only into bob-box (not "all names").
		sar.Status.Allowed = exec && (sar.Spec.User == "alice" || sar.Spec.User == "bob" && ra.Name == "bob-box")
		return true, sar, nil
	})
	return cs
}

func bearer(token string) *http.Request {
	r, _ := http.NewRequest(http.MethodGet, "/", nil)
	if token != "" {
		r.Header.Set("Authorization", "Bearer "+token)
	}
	return r
}

func TestTokenReview(t *testing.T) {
	ctx := context.Background()
	api := &fakeAPI{}
	a := NewTokenReview(api.clientset(), TokenReviewOptions{CacheTTL: time.Minute})
	check := func(what string, r *http.Request, ns, name string, status int, detail string) {
		t.Helper()
		err := a.Authorize(ctx, r, ns, name)
		switch {
		case status == 0 && err != nil:
			t.Errorf("%s: refused %d %s", what, err.Status, err.Detail)
		case status != 0 && (err == nil || err.Status != status || (detail != "" && err.Detail != detail)):
			t.Errorf("%s: %+v, want %d %s", what, err, status, detail)
		}
	}
	check("no header", bearer(""), "team", "box", http.StatusUnauthorized, "Missing or invalid Authorization header.")
	basic := bearer("")
	basic.SetBasicAuth("alice", "pw")
	check("basic auth", basic, "team", "box", http.StatusUnauthorized, "Missing or invalid Authorization header.")
	check("unknown token", bearer("mallory-token"), "team", "box", http.StatusUnauthorized, "Invalid token.")
	check("API server down", bearer("down"), "team", "box", http.StatusBadGateway, "")
	check("alice in team", bearer("alice-token"), "team", "box", 0, "")
	// She was asked about every name of team, which covers box.
	if s := api.lastAccess.Load(); s.User != "alice" || s.UID != "alice-uid" || len(s.Groups) != 1 || s.ResourceAttributes.Name != "" || s.ResourceAttributes.Namespace != "team" {
		t.Errorf("SubjectAccessReview asked %+v", s)
	}
	check("alice elsewhere", bearer("alice-token"), "other", "box", http.StatusForbidden,
		`User "alice" may not create sandboxes/exec.agents.x-k8s.io other/box.`)

	// Positive answers are reused, refusals are not (RefusalTTL is zero).
	reviews, accesses := api.reviews.Load(), api.accesses.Load()
	check("alice in team again", bearer("alice-token"), "team", "box", 0, "")
	if api.reviews.Load() != reviews || api.accesses.Load() != accesses {
		t.Errorf("a repeated allowed request asked the API server again (%d reviews, %d accesses)", api.reviews.Load()-reviews, api.accesses.Load()-accesses)
	}
	check("unknown token again", bearer("mallory-token"), "team", "box", http.StatusUnauthorized, "")
	check("alice elsewhere again", bearer("alice-token"), "other", "box", http.StatusForbidden, "")
	if api.reviews.Load() != reviews+1 || api.accesses.Load() != accesses+1 {
		t.Errorf("refusals were reused: %d reviews, %d accesses since", api.reviews.Load()-reviews, api.accesses.Load()-accesses)
	}

	// Without a cache every request asks.
	api2 := &fakeAPI{}
	a = NewTokenReview(api2.clientset(), TokenReviewOptions{})
	for range 2 {
		check("uncached", bearer("alice-token"), "team", "box", 0, "")
	}
	if api2.reviews.Load() != 2 || api2.accesses.Load() != 2 {
		t.Errorf("without a cache: %d reviews, %d accesses, want 2 and 2", api2.reviews.Load(), api2.accesses.Load())
	}

	// Audiences: the review must confirm one.
	a = NewTokenReview(api.clientset(), TokenReviewOptions{Audiences: []string{"sandbox-router"}})
	check("audience confirmed", bearer("alice-token"), "team", "box", 0, "")
}

// TestTokenReviewRefusalCache: with RefusalTTL, a token the API server did
// not authenticate and an access it denied are answered from the cache
// until the TTL passes; an API server error never is.
func TestTokenReviewRefusalCache(t *testing.T) {
	ctx := context.Background()
	api := &fakeAPI{}
	a := NewTokenReview(api.clientset(), TokenReviewOptions{CacheTTL: time.Minute, RefusalTTL: 200 * time.Millisecond})
	for range 3 {
		if e := a.Authorize(ctx, bearer("mallory-token"), "team", "box"); e == nil || e.Status != http.StatusUnauthorized {
			t.Fatalf("an unknown token: %+v", e)
		}
		if e := a.Authorize(ctx, bearer("alice-token"), "other", "box"); e == nil || e.Status != http.StatusForbidden {
			t.Fatalf("alice elsewhere: %+v", e)
		}
		if e := a.Authorize(ctx, bearer("down"), "team", "box"); e == nil || e.Status != http.StatusBadGateway {
			t.Fatalf("the API server down: %+v", e)
		}
	}
	// mallory once, alice once, down three times; alice's access twice:
	// about all names of other (kept for CacheTTL), then about box.
	if api.reviews.Load() != 5 || api.accesses.Load() != 2 {
		t.Errorf("%d TokenReviews and %d SubjectAccessReviews, want 5 and 2", api.reviews.Load(), api.accesses.Load())
	}
	time.Sleep(300 * time.Millisecond)
	_ = a.Authorize(ctx, bearer("mallory-token"), "team", "box")
	_ = a.Authorize(ctx, bearer("alice-token"), "other", "box")
	if api.reviews.Load() != 6 || api.accesses.Load() != 3 {
		t.Errorf("after the refusal TTL: %d TokenReviews and %d SubjectAccessReviews, want 6 and 3", api.reviews.Load(), api.accesses.Load())
	}
}

// TestAccessAllNames plays a user whose Role names the Sandboxes he may
// exec into: the question about all names that saves a review per new
// Sandbox for a user with the whole namespace never lets him into another
// one, nor carries one user's yes to another.
func TestAccessAllNames(t *testing.T) {
	ctx := context.Background()
	api := &fakeAPI{}
	a := NewTokenReview(api.clientset(), TokenReviewOptions{CacheTTL: time.Minute})
	allow := func(token, name string, want bool) {
		t.Helper()
		if e := a.Authorize(ctx, bearer(token), "team", name); (e == nil) != want {
			t.Errorf("%s into team/%s: %+v, want allowed %t", token, name, e, want)
		} else if !want && e.Status != http.StatusForbidden {
			t.Errorf("%s into team/%s: %d, want 403", token, name, e.Status)
		}
	}
	// alice may exec into any Sandbox of team: one review for many.
	for _, name := range []string{"box-1", "box-2", "box-3", "bob-box"} {
		allow("alice-token", name, true)
	}
	if n := api.accesses.Load(); n != 1 {
		t.Errorf("alice into 4 new Sandboxes: %d SubjectAccessReviews, want 1 (about all names)", n)
	}
	// bob may exec into bob-box only: alice's yes is not his.
	allow("bob-token", "box-1", false)
	allow("bob-token", "alice-box", false)
	allow("bob-token", "bob-box", true)
	allow("bob-token", "bob-box", true)
	allow("bob-token", "box-2", false)
	// bob: all names once (no, kept), then by name box-1, alice-box,
	// bob-box (yes, kept, so once) and box-2 (refusals are not kept:
	// RefusalTTL is 0).
	if n := api.accesses.Load() - 1; n != 5 {
		t.Errorf("bob: %d SubjectAccessReviews, want 5", n)
	}
	// A request that itself asks about all names is never answered by the
	// hint kept for a question by name: it is asked, and refused.
	before := api.accesses.Load()
	bob := &authenticationv1.UserInfo{Username: "bob", UID: "bob-uid", Groups: []string{"devs"}}
	if e := a.Allowed(ctx, bob, AccessAttributes("team", "")); e == nil || e.Status != http.StatusForbidden {
		t.Errorf("bob into every Sandbox of team: %+v, want 403", e)
	}
	if api.accesses.Load() != before+1 {
		t.Errorf("a question about all names was answered from the hint")
	}

	// Without a positive cache, every request is asked by its name.
	api2 := &fakeAPI{}
	a = NewTokenReview(api2.clientset(), TokenReviewOptions{})
	if e := a.Authorize(ctx, bearer("alice-token"), "team", "box-1"); e != nil {
		t.Fatal(e)
	}
	if s := api2.lastAccess.Load(); api2.accesses.Load() != 1 || s.ResourceAttributes.Name != "box-1" {
		t.Errorf("uncached: %d reviews, last about %q, want 1 about box-1", api2.accesses.Load(), s.ResourceAttributes.Name)
	}
}

// TestReviewBudget: tokens never seen authenticated are reviewed within
// their budget, per client address and all together, and refused 429
// beyond it without asking the API server; a token seen authenticated is
// reviewed from a budget of its own, whatever the flood.
func TestReviewBudget(t *testing.T) {
	ctx := context.Background()
	api := &fakeAPI{}
	budget := NewReviewBudget(ReviewBudgetOptions{NewTokenQPS: 0.001, NewTokenBurst: 4, SourceQPS: 0.001, SourceBurst: 2, KnownQPS: 1000, KnownBurst: 10})
	a := NewTokenReview(api.clientset(), TokenReviewOptions{Budget: budget}) // no cache: every request is reviewed
	from := func(token, addr string) *http.Request {
		r := bearer(token)
		r.RemoteAddr = addr
		return r
	}
	// alice authenticates once: her token is known from now on.
	if e := a.Authorize(ctx, from("alice-token", "10.0.0.1:1000"), "team", "box"); e != nil {
		t.Fatal(e)
	}
	// A flood from one address: its share (2, one taken by alice's first
	// review) then 429.
	var codes []int
	for i := range 5 {
		e := a.Authorize(ctx, from(fmt.Sprintf("junk-%d", i), "10.0.0.66:2000"), "team", "box")
		codes = append(codes, e.Status)
	}
	if want := []int{401, 401, 429, 429, 429}; !slices.Equal(codes, want) {
		t.Errorf("a flood from one address: %v, want %v", codes, want)
	}
	// Other addresses take the rest of the shared budget (4: alice, two junk, one more).
	if e := a.Authorize(ctx, from("junk-x", "10.0.0.67:2000"), "team", "box"); e.Status != http.StatusUnauthorized {
		t.Errorf("a new token from another address, within the shared budget: %+v", e)
	}
	if e := a.Authorize(ctx, from("junk-y", "10.0.0.68:2000"), "team", "box"); e.Status != http.StatusTooManyRequests {
		t.Errorf("a new token beyond the shared budget: %+v, want 429", e)
	}
	if n := api.reviews.Load(); n != 4 {
		t.Errorf("%d TokenReviews sent, want 4 (the budget's burst)", n)
	}
	// alice, known, is still reviewed and let through.
	for range 5 {
		if e := a.Authorize(ctx, from("alice-token", "10.0.0.66:2000"), "team", "box"); e != nil {
			t.Errorf("a known token during the flood: %+v", e)
		}
	}
}

func TestBearerToken(t *testing.T) {
	for header, want := range map[string]string{"Bearer abc": "abc", "bearer abc ": "abc", "Bearer ": "", "Basic abc": "", "abc": "", "": ""} {
		r, _ := http.NewRequest(http.MethodGet, "/", nil)
		r.Header.Set("Authorization", header)
		if got, ok := BearerToken(r); got != want || ok != (want != "") {
			t.Errorf("BearerToken(%q) = %q, %t", header, got, ok)
		}
	}
}
