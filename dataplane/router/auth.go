package router

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
)

// Authorizer decides whether a request may reach a Sandbox.
type Authorizer interface {
	// Authorize returns nil to let the request through, else the refusal.
	Authorize(ctx context.Context, r *http.Request, namespace, name string) *Error
}

// The access the TokenReview authorizer checks, as Kubernetes checks
// pods/exec: the caller may create sandboxes/exec (group agents.x-k8s.io)
// on the Sandbox. Reading a Sandbox (get) is not enough: auditors, backup
// and GitOps tools may read what they must never run code in.
const (
	AccessVerb        = "create"
	AccessResource    = "sandboxes"
	AccessSubresource = "exec"
)

// TokenReviewOptions configure NewTokenReview.
type TokenReviewOptions struct {
	// CacheTTL is how long a positive TokenReview or SubjectAccessReview
	// is reused; zero asks the API server every time.
	CacheTTL time.Duration
	// RefusalTTL is how long a refusal (a token the API server did not
	// authenticate, an access it denied) is reused; zero asks again every
	// time. Errors of the API server are never reused.
	RefusalTTL time.Duration
	// CacheSize bounds each cache (entries); default 4096.
	CacheSize int
	// Audiences, if set, are the audiences a token must be issued for.
	Audiences []string
	// Timeout bounds each review; default 5s.
	Timeout time.Duration
	// Budget, if set, bounds the reviews sent to the API server (see
	// ReviewBudget); nil sends every review.
	Budget *ReviewBudget
	// Metrics, if set, counts the reviews sent.
	Metrics *Metrics
}

// TokenReview authenticates the bearer token with a TokenReview and then
// asks with a SubjectAccessReview whether its user may create
// sandboxes/exec on the Sandbox (group agents.x-k8s.io, the Sandbox's
// namespace and name). No token or an unauthenticated one gets 401, a user
// without the right 403, a request beyond the review budget 429, and an API
// server that cannot answer 502.
type TokenReview struct {
	client       kubernetes.Interface
	o            TokenReviewOptions
	users, grant *reviewCache
}

// NewTokenReview returns the TokenReview authorizer.
func NewTokenReview(cs kubernetes.Interface, o TokenReviewOptions) *TokenReview {
	if o.CacheSize <= 0 {
		o.CacheSize = 4096
	}
	if o.Timeout <= 0 {
		o.Timeout = 5 * time.Second
	}
	return &TokenReview{client: cs, o: o, users: newReviewCache(o.CacheSize, clock.RealClock{}), grant: newReviewCache(o.CacheSize, clock.RealClock{})}
}

// Authorize implements Authorizer.
func (a *TokenReview) Authorize(ctx context.Context, r *http.Request, namespace, name string) *Error {
	token, ok := BearerToken(r)
	if !ok {
		return &Error{Status: http.StatusUnauthorized, Reason: ReasonUnauthenticated, Detail: "Missing or invalid Authorization header."}
	}
	user, err := a.authenticate(ctx, token, clientAddress(r))
	if err != nil {
		return err
	}
	return a.authorize(ctx, user, AccessAttributes(namespace, name))
}

// Authenticate reviews token as Authorize does (TokenReview, cached,
// within the budget, source being the client's address): for front doors
// that take the token from another header (the E2B API's X-API-KEY).
func (a *TokenReview) Authenticate(ctx context.Context, token, source string) (*authenticationv1.UserInfo, *Error) {
	return a.authenticate(ctx, token, source)
}

// Allowed asks whether user may do what attrs describe
// (SubjectAccessReview, cached, within the budget): nil if so, else the
// refusal (403, or 429/502 when it could not be asked).
func (a *TokenReview) Allowed(ctx context.Context, user *authenticationv1.UserInfo, attrs *authorizationv1.ResourceAttributes) *Error {
	return a.authorize(ctx, user, attrs)
}

// ClientAddress is the address a request's connection came from, without
// its port (the unit of the per-source review budget).
func ClientAddress(r *http.Request) string { return clientAddress(r) }

// errInvalidToken is the refusal of a token the API server did not
// authenticate (cached as such for RefusalTTL).
var errInvalidToken = &Error{Status: http.StatusUnauthorized, Reason: ReasonUnauthenticated, Detail: "Invalid token."}

func (a *TokenReview) authenticate(ctx context.Context, token, source string) (*authenticationv1.UserInfo, *Error) {
	sum := sha256.Sum256([]byte(token)) // raw tokens are never kept
	key := hex.EncodeToString(sum[:])
	v, e := a.users.answer(key, func() (any, *Error) {
		return a.reviewToken(context.WithoutCancel(ctx), token, key, source)
	})
	if e != nil {
		return nil, e
	}
	if user, ok := v.(*authenticationv1.UserInfo); ok && user != nil {
		return user, nil
	}
	return nil, errInvalidToken // a refusal kept for RefusalTTL
}

// reviewToken asks the API server who token (whose hash is key) is,
// within the budget, and keeps the answer: a user for CacheTTL, asked
// again ahead of its end while it is used; a refusal for RefusalTTL, or
// none, then also forgetting a user kept before.
func (a *TokenReview) reviewToken(ctx context.Context, token, key, source string) (*authenticationv1.UserInfo, *Error) {
	ctx, cancel := context.WithTimeout(ctx, a.o.Timeout)
	defer cancel()
	if e := a.o.Budget.tokenReview(ctx, key, source); e != nil {
		a.o.Metrics.review(reviewToken, reviewThrottled)
		return nil, e
	}
	tr, err := a.client.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{
		Spec: authenticationv1.TokenReviewSpec{Token: token, Audiences: a.o.Audiences},
	}, metav1.CreateOptions{})
	if err != nil {
		a.o.Metrics.review(reviewToken, reviewError)
		return nil, &Error{Status: http.StatusBadGateway, Reason: ReasonAuthError, Detail: "Could not authenticate the request: the API server did not review the token."}
	}
	if !tr.Status.Authenticated || !audienceMatches(a.o.Audiences, tr.Status.Audiences) {
		a.o.Metrics.review(reviewToken, reviewRefused)
		a.o.Budget.forget(key)
		if a.o.RefusalTTL > 0 {
			a.users.add(key, false, a.o.RefusalTTL, false)
		} else {
			a.users.remove(key)
		}
		return nil, errInvalidToken
	}
	a.o.Metrics.review(reviewToken, reviewAllowed)
	a.o.Budget.remember(key)
	user := tr.Status.User
	if a.o.CacheTTL > 0 {
		a.users.add(key, &user, a.o.CacheTTL, true)
	}
	return &user, nil
}

// audienceMatches: with audiences asked for, the review must name one.
func audienceMatches(want, got []string) bool {
	if len(want) == 0 {
		return true
	}
	for _, w := range want {
		for _, g := range got {
			if w == g {
				return true
			}
		}
	}
	return false
}

// AccessAttributes are the SubjectAccessReview's resource attributes for a
// request to the Sandbox namespace/name.
func AccessAttributes(namespace, name string) *authorizationv1.ResourceAttributes {
	return &authorizationv1.ResourceAttributes{
		Namespace: namespace, Name: name, Verb: AccessVerb,
		Group: sandboxv1beta1.GroupName, Resource: AccessResource, Subresource: AccessSubresource,
	}
}

// authorize asks whether user may do what attrs describe. When attrs name
// one object and positive answers are cached, it first asks about every
// name in the namespace (Name "": "all" to a SubjectAccessReview), and
// keeps that answer, either way, for CacheTTL: a user who may exec into
// any Sandbox of a namespace (a Role without resourceNames, as most are)
// then costs one review per namespace and TTL instead of one per new
// Sandbox; a user limited to some names costs that one more and is then
// asked about each name as before. A yes about all names is a yes about
// each; a no about all names says nothing about one, so it only sends the
// question on by name.
func (a *TokenReview) authorize(ctx context.Context, user *authenticationv1.UserInfo, attrs *authorizationv1.ResourceAttributes) *Error {
	spec := accessSpec(user, attrs)
	if attrs.Name != "" && a.o.CacheTTL > 0 {
		all := *attrs
		all.Name = ""
		allSpec := spec
		allSpec.ResourceAttributes = &all
		allowed, err := a.review(ctx, allSpec, allNamesKey, a.o.CacheTTL, a.o.CacheTTL)
		if err != nil || allowed {
			return err
		}
	}
	allowed, err := a.review(ctx, spec, "", a.o.CacheTTL, a.o.RefusalTTL)
	if err != nil || allowed {
		return err
	}
	resource := attrs.Resource
	if attrs.Subresource != "" {
		resource += "/" + attrs.Subresource
	}
	return &Error{Status: http.StatusForbidden, Reason: ReasonForbidden,
		Detail: fmt.Sprintf("User %q may not %s %s.%s %s/%s.", user.Username, attrs.Verb, resource, attrs.Group, attrs.Namespace, attrs.Name)}
}

// allNamesKey prefixes the cache key of a question about all names asked
// on behalf of one: its no is kept for CacheTTL as a hint, not as a
// refusal, so it must not answer a request that asks about all names.
const allNamesKey = "all-names/"

// accessSpec is the SubjectAccessReview asking whether user may do attrs.
func accessSpec(user *authenticationv1.UserInfo, attrs *authorizationv1.ResourceAttributes) authorizationv1.SubjectAccessReviewSpec {
	extra := map[string]authorizationv1.ExtraValue{}
	for k, v := range user.Extra {
		extra[k] = authorizationv1.ExtraValue(v)
	}
	return authorizationv1.SubjectAccessReviewSpec{
		User: user.Username, UID: user.UID, Groups: user.Groups, Extra: extra,
		ResourceAttributes: attrs,
	}
}

// review answers spec from the cache (its key prefixed by prefix) or by a
// SubjectAccessReview within the budget, keeping a yes for allowedTTL and
// a no for refusedTTL (zero: not kept). The error is set only when it
// could not be asked (429, 502).
func (a *TokenReview) review(ctx context.Context, spec authorizationv1.SubjectAccessReviewSpec, prefix string, allowedTTL, refusedTTL time.Duration) (bool, *Error) {
	raw, _ := json.Marshal(spec) // the whole question is the key
	sum := sha256.Sum256(raw)
	key := prefix + hex.EncodeToString(sum[:])
	v, e := a.grant.answer(key, func() (any, *Error) {
		return a.askAccess(context.WithoutCancel(ctx), spec, key, allowedTTL, refusedTTL)
	})
	allowed, _ := v.(bool)
	return allowed, e
}

// askAccess sends the SubjectAccessReview spec within the budget and keeps
// its answer under key: a yes for allowedTTL, asked again ahead of its end
// while it is used; a no for refusedTTL, or none, then also forgetting a
// yes kept before.
func (a *TokenReview) askAccess(ctx context.Context, spec authorizationv1.SubjectAccessReviewSpec, key string, allowedTTL, refusedTTL time.Duration) (bool, *Error) {
	ctx, cancel := context.WithTimeout(ctx, a.o.Timeout)
	defer cancel()
	if e := a.o.Budget.accessReview(ctx); e != nil {
		a.o.Metrics.review(reviewAccess, reviewThrottled)
		return false, e
	}
	sar, err := a.client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: spec}, metav1.CreateOptions{})
	if err != nil {
		a.o.Metrics.review(reviewAccess, reviewError)
		return false, &Error{Status: http.StatusBadGateway, Reason: ReasonAuthError, Detail: "Could not authorize the request: the API server did not review the access."}
	}
	allowed := sar.Status.Allowed && !sar.Status.Denied
	ttl := allowedTTL
	if allowed {
		a.o.Metrics.review(reviewAccess, reviewAllowed)
	} else {
		a.o.Metrics.review(reviewAccess, reviewRefused)
		ttl = refusedTTL
	}
	switch {
	case ttl > 0:
		a.grant.add(key, allowed, ttl, allowed)
	case !allowed:
		a.grant.remove(key)
	}
	return allowed, nil
}

// BearerToken returns the token of an "Authorization: Bearer <token>" header.
func BearerToken(r *http.Request) (string, bool) {
	v := r.Header.Get("Authorization")
	scheme, token, ok := strings.Cut(v, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}
