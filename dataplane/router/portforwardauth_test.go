package router

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
)

// refuseAll is an Authorizer that refuses every request and counts them.
type refuseAll struct{ calls int }

func (a *refuseAll) Authorize(context.Context, *http.Request, string, string) *Error {
	a.calls++
	return &Error{Status: http.StatusUnauthorized, Reason: ReasonUnauthenticated, Detail: "Missing or invalid Authorization header."}
}

func requestVia(local, remote string) *http.Request {
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.RemoteAddr = remote
	addr, _ := net.ResolveTCPAddr("tcp", local)
	return r.WithContext(context.WithValue(r.Context(), http.LocalAddrContextKey, addr))
}

// Only a connection from loopback to loopback (a port-forward into the
// Pod) skips the token; anything that came over the network, or a request
// whose addresses are unknown, is asked for one.
func TestTrustPortForward(t *testing.T) {
	for _, c := range []struct {
		name          string
		local, remote string
		trusted       bool
	}{
		{"port-forward, IPv4", "127.0.0.1:8080", "127.0.0.1:51234", true},
		{"port-forward, IPv6", "[::1]:8080", "[::1]:51234", true},
		{"pod network", "10.0.3.7:8080", "10.0.9.1:40000", false},
		{"to the pod IP from loopback", "10.0.3.7:8080", "127.0.0.1:40000", false},
		{"to loopback from elsewhere", "127.0.0.1:8080", "10.0.9.1:40000", false},
		{"forged remote", "10.0.3.7:8080", "127.0.0.1", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			next := &refuseAll{}
			e := TrustPortForward{Next: next}.Authorize(context.Background(), requestVia(c.local, c.remote), "ns", "sb")
			if c.trusted && (e != nil || next.calls != 0) {
				t.Errorf("refused %v (next asked %d times), want let through", e, next.calls)
			}
			if !c.trusted && (e == nil || e.Status != http.StatusUnauthorized || next.calls != 1) {
				t.Errorf("got %v (next asked %d times), want the next authorizer's 401", e, next.calls)
			}
		})
	}
	next := &refuseAll{}
	if e := (TrustPortForward{Next: next}).Authorize(context.Background(), httptest.NewRequest(http.MethodGet, "/", nil), "ns", "sb"); e == nil || next.calls != 1 {
		t.Errorf("a request without a local address was let through")
	}
}

// net/http sets the local address the check reads: a real connection to
// 127.0.0.1 is trusted.
func TestTrustPortForwardRealConnection(t *testing.T) {
	next := &refuseAll{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if e := (TrustPortForward{Next: next}).Authorize(r.Context(), r, "ns", "sb"); e != nil {
			http.Error(w, e.Detail, e.Status)
		}
	}))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK || next.calls != 0 {
		t.Errorf("status %d, next asked %d times; want 200 without asking", resp.StatusCode, next.calls)
	}
}
