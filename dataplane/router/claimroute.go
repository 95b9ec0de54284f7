package router

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
)

// IndexClaimUID indexes the router's cached Sandboxes by the UID of the
// SandboxClaim controlling them (API group and kind checked, ClaimOf): a
// request that names only its claim (CheckClaimRoute) finds its Sandbox
// in one lookup.
const IndexClaimUID = "router.agents.x-k8s.io/claim-uid"

// ClaimUIDIndex is IndexClaimUID's index function.
func ClaimUIDIndex(obj client.Object) []string {
	if ref := extv1beta1.ClaimOf(obj); ref != nil && ref.UID != "" {
		return []string{string(ref.UID)}
	}
	return nil
}

// Authenticator is an Authorizer that can tell, before a request's
// Sandbox is known, whether its caller is anyone at all: a request that
// names only its claim is resolved (and may wait for the claim to take a
// Sandbox) only for a caller who is, and then authorized on the Sandbox
// found.
type Authenticator interface {
	AuthenticateRequest(ctx context.Context, r *http.Request) *Error
}

// AuthenticateRequest implements Authenticator: the bearer token is
// reviewed (cached) as Authorize reviews it.
func (a *TokenReview) AuthenticateRequest(ctx context.Context, r *http.Request) *Error {
	token, ok := BearerToken(r)
	if !ok {
		return &Error{Status: http.StatusUnauthorized, Reason: ReasonUnauthenticated, Detail: "Missing or invalid Authorization header."}
	}
	_, err := a.authenticate(ctx, token, clientAddress(r))
	return err
}

// claimTarget finds the Sandbox of a target that names only its claim:
// the caller authenticated first (Authenticator), then the Sandbox the
// claim controls, waited for as any Sandbox not yet routable is (up to
// ClaimWait and the request's deadline). The target returned names it
// and is pinned to its UID, so the request is authorized on that Sandbox
// and routed to it alone.
func (h *Handler) claimTarget(r *http.Request, t Target, start time.Time) (Target, *Error) {
	if a, ok := h.o.Authorizer.(Authenticator); ok {
		if e := a.AuthenticateRequest(r.Context(), r); e != nil {
			return t, e
		}
	}
	wait := h.o.ClaimWait
	if wait <= 0 {
		wait = h.o.ResolveWait
	}
	ep, e := h.resolveWaiting(r.Context(), t, wait, start.Add(t.Timeout))
	if e != nil {
		return t, e
	}
	if ep.SandboxUID == "" { // not a Sandbox the cache holds: never routed by claim
		return t, &Error{Status: http.StatusNotFound, Reason: ReasonNotFound,
			Detail: fmt.Sprintf("No Sandbox of claim UID %s in namespace %s.", t.ClaimUID, t.Namespace)}
	}
	t.ID, t.UID = ep.Sandbox, ep.SandboxUID
	return t, nil
}

// resolveClaim resolves a target that names only its claim: the one
// Sandbox of t.Namespace the claim controls (IndexClaimUID), then as any
// Sandbox. None yet (the claim has not taken one) is 404 and more than one
// (a moment in a race of two controllers) 409, both looked at again while
// the request may wait. Never the DNS fallback.
func (r *CacheResolver) resolveClaim(ctx context.Context, t Target) (Endpoint, error) {
	if len(r.Namespaces) > 0 && !slices.Contains(r.Namespaces, t.Namespace) {
		return Endpoint{}, &Error{Status: http.StatusNotFound, Reason: ReasonNotFound,
			Detail: fmt.Sprintf("No Sandbox of claim UID %s in namespace %s.", t.ClaimUID, t.Namespace)}
	}
	var list sandboxv1beta1.SandboxList
	if err := r.Reader.List(ctx, &list, client.InNamespace(t.Namespace), client.MatchingFields{IndexClaimUID: string(t.ClaimUID)}); err != nil {
		return Endpoint{}, &Error{Status: http.StatusBadGateway, Reason: ReasonCacheError,
			Detail: fmt.Sprintf("Could not look up the sandbox of claim UID %s in namespace %s.", t.ClaimUID, t.Namespace)}
	}
	var found []*sandboxv1beta1.Sandbox
	for i := range list.Items {
		// The index is the cache's; the claim is checked again here.
		if ref := extv1beta1.ClaimOf(&list.Items[i]); ref != nil && ref.UID == t.ClaimUID {
			found = append(found, &list.Items[i])
		}
	}
	switch len(found) {
	case 0:
		return Endpoint{}, &Error{Status: http.StatusNotFound, Reason: ReasonNotFound, Retry: true,
			Detail: fmt.Sprintf("No Sandbox of claim UID %s in namespace %s.", t.ClaimUID, t.Namespace)}
	case 1:
	default:
		return Endpoint{}, &Error{Status: http.StatusConflict, Reason: ReasonNotReady, Retry: true,
			Detail: fmt.Sprintf("Claim UID %s controls %d Sandboxes in namespace %s.", t.ClaimUID, len(found), t.Namespace)}
	}
	t.ID = found[0].Name
	return r.route(ctx, found[0], t)
}

// checks is HeaderChecks' value on /healthz.
func (h *Handler) checks() string {
	if h.o.RouteByClaim {
		return RouterChecks
	}
	return CheckClaimUID
}

// resolvedOnly answers a request that asked only where it goes
// (HeaderResolveOnly), once routed and its caller authorized: 204 with
// the Sandbox's name and UID, the sandbox never reached. False for any
// other request, or an endpoint that is not a Sandbox of the cache.
func resolvedOnly(w http.ResponseWriter, r *http.Request, reqID string, ep Endpoint) bool {
	if r.Header.Get(HeaderResolveOnly) != "true" || ep.SandboxUID == "" {
		return false
	}
	w.Header().Set(HeaderRequestID, reqID)
	w.Header().Set(HeaderNotForwarded, "true")
	w.Header().Set(HeaderSandboxID, ep.Sandbox)
	w.Header().Set(HeaderUID, string(ep.SandboxUID))
	w.WriteHeader(http.StatusNoContent)
	return true
}
