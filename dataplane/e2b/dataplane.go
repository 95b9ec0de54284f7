package e2b

import (
	"context"
	"net/http"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	"github.com/agentsandbox/reconciler/dataplane/router"
)

// DefaultSandboxPort is the port of a data-plane request without
// E2b-Sandbox-Port (envd's).
const DefaultSandboxPort = 49983

// connectGrace is added to a request's Connect-Timeout-Ms, so that the
// sandbox answers a deadline it was told about before the router cuts it.
const connectGrace = 5 * time.Second

// dataPlane serves a request carrying E2b-Sandbox-Id: it must carry the
// sandbox's envdAccessToken in X-Access-Token; it goes to the Pod of the
// Sandbox the ID's claim controls, on E2b-Sandbox-Port, through the
// router's proxy, without X-Access-Token, X-API-KEY and Authorization.
func (s *Server) dataPlane(w http.ResponseWriter, r *http.Request) {
	id := r.Header.Get(HeaderSandboxID)
	ns, name, err := ParseID(id)
	if err != nil {
		writeConnectError(w, &connectError{status: http.StatusBadRequest, Code: "invalid_argument", Message: "invalid E2b-Sandbox-Id"})
		return
	}
	port := DefaultSandboxPort
	if raw := r.Header.Get(HeaderSandboxPort); raw != "" {
		p, err := strconv.Atoi(raw)
		if err != nil || p < 1 || p > 65535 {
			writeConnectError(w, &connectError{status: http.StatusBadRequest, Code: "invalid_argument", Message: "invalid E2b-Sandbox-Port"})
			return
		}
		port = p
	}
	token := r.Header.Get(HeaderAccessToken)
	r.Header.Del(HeaderAccessToken)
	r.Header.Del(HeaderAPIKey)
	r.Header.Del("Authorization")
	if token == "" {
		writeConnectError(w, &connectError{status: http.StatusUnauthorized, Code: "unauthenticated",
			Message: "missing X-Access-Token: use the envdAccessToken create or connect returned"})
		return
	}
	claim := s.cachedClaim(r.Context(), ns, name)
	if claim == nil {
		writeConnectError(w, &connectError{status: http.StatusNotFound, Code: "not_found", Message: "sandbox " + id + " not found"})
		return
	}
	if s.o.Tokens.Check(ns, name, claim.UID, token) != nil {
		writeConnectError(w, &connectError{status: http.StatusUnauthorized, Code: "unauthenticated", Message: "wrong X-Access-Token for sandbox " + id})
		return
	}
	if claim.Status.Sandbox.Name == "" {
		writeConnectError(w, &connectError{status: http.StatusServiceUnavailable, Code: "unavailable", Message: "sandbox " + id + " is not running yet"})
		return
	}
	t := router.Target{ID: claim.Status.Sandbox.Name, Namespace: ns, Port: port, ClaimUID: claim.UID,
		ResumeOnConnect: claim.Annotations[AnnotationAutoResume] == "true", Timeout: s.requestTimeout(r)}
	s.o.Proxy.ServeTarget(w, r, t)
}

// requestTimeout is the request's Connect-Timeout-Ms plus a grace,
// capped at MaxRequestTimeout; zero (the router's default) without one.
func (s *Server) requestTimeout(r *http.Request) time.Duration {
	ms, err := strconv.ParseInt(r.Header.Get("Connect-Timeout-Ms"), 10, 64)
	if err != nil || ms <= 0 {
		return 0
	}
	d := time.Duration(ms)*time.Millisecond + connectGrace
	if s.o.MaxRequestTimeout > 0 && d > s.o.MaxRequestTimeout {
		d = s.o.MaxRequestTimeout
	}
	return d
}

// cachedClaim is the E2B claim ns/name from the cache, waiting up to
// ResolveWait for one just made; nil if there is none (or it is being
// deleted).
func (s *Server) cachedClaim(ctx context.Context, ns, name string) *extv1beta1.SandboxClaim {
	deadline := time.Now().Add(s.o.ResolveWait)
	for {
		changed := s.o.Changes.Wait()
		var c extv1beta1.SandboxClaim
		err := s.o.Cache.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &c)
		if err == nil {
			if !isE2BClaim(&c) || c.DeletionTimestamp != nil {
				return nil
			}
			return &c
		}
		left := time.Until(deadline)
		if !apierrors.IsNotFound(err) || left <= 0 || !router.Pause(ctx, changed, min(left, pollInterval)) {
			return nil
		}
	}
}
