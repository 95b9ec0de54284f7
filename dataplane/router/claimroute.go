package router

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/types"
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

// ClaimFinder is a Resolver that can name the Sandbox a claim controls
// without routing to it: a request that names only its claim is
// authorized on that Sandbox before anything is done on its behalf
// (a resume on connect among them).
type ClaimFinder interface {
	// SandboxOfClaim returns the name and UID of the one Sandbox of ns
	// the claim of UID claimUID controls. None yet is a 404 and more than
	// one a 409, both with Retry.
	SandboxOfClaim(ctx context.Context, ns string, claimUID types.UID) (string, types.UID, error)
}

// claimTarget finds the Sandbox of a target that names only its claim:
// the caller authenticated first (Authenticator), then the Sandbox the
// claim controls (ClaimFinder), looked for again while the claim has
// none, up to ClaimWait and the request's deadline. The target returned
// names it and is pinned to its UID; waitUntil is when ClaimWait passes,
// until which the request may wait for it to become routable. The caller
// is authorized on it next, and only then is it routed to, or resumed.
func (h *Handler) claimTarget(r *http.Request, t Target, start time.Time) (_ Target, waitUntil time.Time, _ *Error) {
	if a, ok := h.o.Authorizer.(Authenticator); ok {
		if e := a.AuthenticateRequest(r.Context(), r); e != nil {
			return t, waitUntil, e
		}
	}
	finder, ok := h.o.Resolver.(ClaimFinder)
	if !ok {
		return t, waitUntil, &Error{Status: http.StatusNotImplemented, Reason: ReasonNotFound,
			Detail: "This router cannot find a Sandbox by its claim; name it with X-Sandbox-ID."}
	}
	wait := h.o.ClaimWait
	if wait <= 0 {
		wait = h.o.ResolveWait
	}
	waitUntil = start.Add(wait)
	deadline := earliest(waitUntil, start.Add(t.Timeout))
	for looks := 1; ; looks++ {
		changed := h.o.Changes.Wait()
		name, uid, err := finder.SandboxOfClaim(r.Context(), t.Namespace, t.ClaimUID)
		if err == nil && t.UID != "" && uid != t.UID {
			// X-Sandbox-UID narrows the claim's Sandbox to the one the
			// caller knows.
			err = &Error{Status: http.StatusNotFound, Reason: ReasonUIDMismatch, Retry: true,
				Detail: fmt.Sprintf("No Sandbox of claim UID %s with UID %s in namespace %s.", t.ClaimUID, t.UID, t.Namespace)}
		}
		if err == nil {
			if looks > 1 {
				h.o.Metrics.resolveWaited(time.Since(start).Seconds())
			}
			t.ID, t.UID = name, uid
			return t, waitUntil, nil
		}
		e := AsError(err)
		left := time.Until(deadline)
		if !e.Retry || left <= 0 || !Pause(r.Context(), changed, min(left, resolvePoll)) {
			return t, waitUntil, e
		}
	}
}

// SandboxOfClaim implements ClaimFinder: the one Sandbox of ns the claim
// controls (IndexClaimUID, and the controller reference checked again).
func (r *CacheResolver) SandboxOfClaim(ctx context.Context, ns string, claimUID types.UID) (string, types.UID, error) {
	sb, err := r.sandboxOfClaim(ctx, ns, claimUID)
	if err != nil {
		return "", "", err
	}
	return sb.Name, sb.UID, nil
}

// resolveClaim resolves a target that names only its claim: the one
// Sandbox of t.Namespace the claim controls, routed to as any Sandbox.
// Never the DNS fallback.
func (r *CacheResolver) resolveClaim(ctx context.Context, t Target) (Endpoint, error) {
	sb, err := r.sandboxOfClaim(ctx, t.Namespace, t.ClaimUID)
	if err != nil {
		return Endpoint{}, err
	}
	t.ID = sb.Name
	return r.route(ctx, sb, t)
}

// sandboxOfClaim is the one Sandbox of ns the claim of UID claimUID
// controls. None yet (the claim has not taken one) is 404 and more than
// one (a moment in a race of two controllers) 409, both with Retry.
func (r *CacheResolver) sandboxOfClaim(ctx context.Context, ns string, claimUID types.UID) (*sandboxv1beta1.Sandbox, error) {
	none := &Error{Status: http.StatusNotFound, Reason: ReasonNotFound, Retry: true,
		Detail: fmt.Sprintf("No Sandbox of claim UID %s in namespace %s.", claimUID, ns)}
	if len(r.Namespaces) > 0 && !slices.Contains(r.Namespaces, ns) {
		none.Retry = false
		return nil, none
	}
	var list sandboxv1beta1.SandboxList
	if err := r.Reader.List(ctx, &list, client.InNamespace(ns), client.MatchingFields{IndexClaimUID: string(claimUID)}); err != nil {
		return nil, &Error{Status: http.StatusBadGateway, Reason: ReasonCacheError,
			Detail: fmt.Sprintf("Could not look up the sandbox of claim UID %s in namespace %s.", claimUID, ns)}
	}
	var found []*sandboxv1beta1.Sandbox
	for i := range list.Items {
		// The index is the cache's; the claim is checked again here.
		if ref := extv1beta1.ClaimOf(&list.Items[i]); ref != nil && ref.UID == claimUID {
			found = append(found, &list.Items[i])
		}
	}
	switch len(found) {
	case 0:
		return nil, none
	case 1:
		return found[0], nil
	default:
		return nil, &Error{Status: http.StatusConflict, Reason: ReasonNotReady, Retry: true,
			Detail: fmt.Sprintf("Claim UID %s controls %d Sandboxes in namespace %s.", claimUID, len(found), ns)}
	}
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
