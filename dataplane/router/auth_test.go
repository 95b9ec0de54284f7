package router

import (
	"context"
	"errors"
	"net/http"
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
// and SubjectAccessReviews (alice may get sandboxes in team), counting them.
type fakeAPI struct {
	reviews, accesses atomic.Int64
	lastAccess        atomic.Pointer[authorizationv1.SubjectAccessReviewSpec]
}

func (f *fakeAPI) clientset() *fake.Clientset {
	cs := fake.NewClientset()
	cs.PrependReactor("create", "tokenreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		f.reviews.Add(1)
		tr := a.(k8stesting.CreateAction).GetObject().(*authenticationv1.TokenReview)
		switch tr.Spec.Token {
		case "down":
			return true, nil, errors.New("connection refused")
		case "alice-token":
			tr.Status = authenticationv1.TokenReviewStatus{Authenticated: true, Audiences: tr.Spec.Audiences,
				User: authenticationv1.UserInfo{Username: "alice", UID: "alice-uid", Groups: []string{"devs"}}}
		}
		return true, tr, nil
	})
	cs.PrependReactor("create", "subjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		f.accesses.Add(1)
		sar := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview)
		spec := sar.Spec
		f.lastAccess.Store(&spec)
		ra := sar.Spec.ResourceAttributes
		sar.Status.Allowed = sar.Spec.User == "alice" && ra.Namespace == "team" && ra.Verb == "get" &&
			ra.Group == "agents.x-k8s.io" && ra.Resource == "sandboxes"
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
	if s := api.lastAccess.Load(); s.User != "alice" || s.UID != "alice-uid" || len(s.Groups) != 1 || s.ResourceAttributes.Name != "box" {
		t.Errorf("SubjectAccessReview asked %+v", s)
	}
	check("alice elsewhere", bearer("alice-token"), "other", "box", http.StatusForbidden,
		`User "alice" may not get sandboxes.agents.x-k8s.io other/box.`)

	// Positive answers are reused, refusals are not.
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

func TestBearerToken(t *testing.T) {
	for header, want := range map[string]string{"Bearer abc": "abc", "bearer abc ": "abc", "Bearer ": "", "Basic abc": "", "abc": "", "": ""} {
		r, _ := http.NewRequest(http.MethodGet, "/", nil)
		r.Header.Set("Authorization", header)
		if got, ok := BearerToken(r); got != want || ok != (want != "") {
			t.Errorf("BearerToken(%q) = %q, %t", header, got, ok)
		}
	}
}
