package e2b

import (
	"context"
	"net/http"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	"github.com/agentsandbox/reconciler/dataplane/router"
)

// HeaderAPIKey carries the control plane's credential.
const HeaderAPIKey = "X-API-KEY"

// caller is who a control-plane request comes from and the namespace its
// credential maps to.
type caller struct {
	namespace string
	user      *authenticationv1.UserInfo // nil with no review (Auth nil)
}

// serviceAccountPrefix starts a ServiceAccount's user name:
// system:serviceaccount:<namespace>:<name>.
const serviceAccountPrefix = "system:serviceaccount:"

// namespaceOf is the namespace a user's sandboxes live in: a
// ServiceAccount's own namespace, else def.
func namespaceOf(user *authenticationv1.UserInfo, def string) string {
	if rest, ok := strings.CutPrefix(user.Username, serviceAccountPrefix); ok {
		if ns, _, ok := strings.Cut(rest, ":"); ok && len(validation.IsDNS1123Label(ns)) == 0 {
			return ns
		}
	}
	return def
}

// authenticate reads X-API-KEY: with Auth, a key of Keys' Secrets (their
// namespace and user), else a Kubernetes bearer token (TokenReview);
// without Auth, any non-empty key, mapped to DefaultNamespace.
func (s *Server) authenticate(ctx context.Context, r *http.Request) (*caller, *apiError) {
	key := strings.TrimSpace(r.Header.Get(HeaderAPIKey))
	if key == "" {
		return nil, errorf(http.StatusUnauthorized, "missing X-API-KEY header: set E2B_API_KEY (a Kubernetes bearer token, e.g. kubectl create token NAME)")
	}
	if s.o.Auth == nil {
		return &caller{namespace: s.o.DefaultNamespace}, nil
	}
	if s.o.Keys != nil {
		user, ns, found, err := s.o.Keys.lookup(ctx, key)
		if err != nil {
			s.o.Log.Error(err, "looking up an API key")
			return nil, errorf(http.StatusBadGateway, "could not look the API key up")
		}
		if found {
			return &caller{namespace: ns, user: user}, nil
		}
	}
	user, e := s.o.Auth.Authenticate(ctx, key, router.ClientAddress(r))
	if e != nil {
		if e.Status == http.StatusUnauthorized {
			return nil, errorf(http.StatusUnauthorized, "invalid API key: X-API-KEY must be a Kubernetes bearer token the API server authenticates")
		}
		return nil, fromRouter(e)
	}
	return &caller{namespace: namespaceOf(user, s.o.DefaultNamespace), user: user}, nil
}

// Rights a control-plane call needs, beyond the verb on sandboxclaims.
type needs int

const (
	claimsOnly needs = iota
	// withExec: the call runs code, or hands out what lets one run code
	// (the envdAccessToken), so it also needs create sandboxes/exec in
	// the namespace, as the router's own data plane does.
	withExec
)

// allow asks whether c may do verb on the namespace's sandboxclaims (name
// empty: any), and, with withExec, create sandboxes/exec there.
func (s *Server) allow(ctx context.Context, c *caller, verb, name string, n needs) *apiError {
	if s.o.Auth == nil {
		return nil
	}
	attrs := []*authorizationv1.ResourceAttributes{{Namespace: c.namespace, Name: name, Verb: verb,
		Group: extv1beta1.GroupVersion.Group, Resource: "sandboxclaims"}}
	if n == withExec {
		attrs = append(attrs, &authorizationv1.ResourceAttributes{Namespace: c.namespace, Verb: router.AccessVerb,
			Group: sandboxv1beta1.GroupName, Resource: router.AccessResource, Subresource: router.AccessSubresource})
	}
	for _, a := range attrs {
		if e := s.o.Auth.Allowed(ctx, c.user, a); e != nil {
			return fromRouter(e)
		}
	}
	return nil
}
