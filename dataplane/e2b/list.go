package e2b

import (
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
)

// Page sizes of GET /v2/sandboxes.
const (
	defaultListLimit = 100
	maxListLimit     = 1000
)

// listQuery is what GET /v2/sandboxes asks for.
type listQuery struct {
	metadata  map[string]string
	states    []string // empty: all
	template  string
	limit     int64
	nextToken string
}

// parseListQuery reads the query. The metadata filter arrives encoded
// twice over the URL's own encoding: once decoded by the URL, it is a
// form ("k=v&k2=v2") whose keys and values are URI-encoded again.
func parseListQuery(q url.Values) (*listQuery, *apiError) {
	lq := &listQuery{metadata: map[string]string{}, limit: defaultListLimit, nextToken: q.Get("nextToken"), template: q.Get("template")}
	if raw := q.Get("metadata"); raw != "" {
		form, err := url.ParseQuery(raw)
		if err != nil {
			return nil, errorf(http.StatusBadRequest, "invalid metadata filter: %v", err)
		}
		for k, vs := range form {
			key, err1 := url.PathUnescape(k)
			val, err2 := url.PathUnescape(vs[len(vs)-1])
			if err1 != nil || err2 != nil {
				return nil, errorf(http.StatusBadRequest, "invalid metadata filter: bad escape in %.60q", k)
			}
			lq.metadata[key] = val
		}
	}
	for _, v := range q["state"] {
		for _, st := range strings.Split(v, ",") {
			switch st = strings.TrimSpace(st); st {
			case StateRunning, StatePaused:
				lq.states = append(lq.states, st)
			case "":
			default:
				return nil, errorf(http.StatusBadRequest, "invalid state %.40q: want running or paused", st)
			}
		}
	}
	if raw := q.Get("limit"); raw != "" {
		n, err := strconv.ParseInt(raw, 10, 64)
		if err != nil || n < 1 || n > maxListLimit {
			return nil, errorf(http.StatusBadRequest, "limit must be between 1 and %d", maxListLimit)
		}
		lq.limit = n
	}
	return lq, nil
}

// list serves GET /v2/sandboxes (and /sandboxes): the caller's
// namespace's E2B sandboxes, a page at a time (the API server's continue
// token is nextToken), filtered by metadata, state and template. Metadata
// entries that are labels are filtered by the API server; the rest, and
// state, on the page (so a page may hold fewer than limit).
func (s *Server) list(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	c, e := s.authenticate(ctx, r)
	if e == nil {
		e = s.allow(ctx, c, "list", "", claimsOnly)
	}
	var lq *listQuery
	if e == nil {
		lq, e = parseListQuery(r.URL.Query())
	}
	if e != nil {
		writeAPIError(w, e)
		return
	}
	sel := labels.Set{LabelSandbox: "true"}
	for k, v := range lq.metadata {
		if key, ok := metadataLabel(k, v); ok {
			sel[key] = v
		}
	}
	var claims extv1beta1.SandboxClaimList
	err := s.o.Client.List(ctx, &claims, client.InNamespace(c.namespace), client.MatchingLabels(sel),
		client.Limit(lq.limit), client.Continue(lq.nextToken))
	if err != nil {
		if apierrors.IsResourceExpired(err) || apierrors.IsBadRequest(err) {
			writeAPIError(w, errorf(http.StatusBadRequest, "invalid or expired nextToken"))
			return
		}
		writeAPIError(w, s.apiFailure("listing SandboxClaims", err))
		return
	}
	out := []sandboxInfo{}
	for i := range claims.Items {
		claim := &claims.Items[i]
		if claim.DeletionTimestamp != nil || !isE2BClaim(claim) {
			continue
		}
		if lq.template != "" && claim.Annotations[AnnotationTemplateID] != lq.template {
			continue
		}
		info := s.describe(ctx, claim)
		if !matches(info.Metadata, lq.metadata) || (len(lq.states) > 0 && !slices.Contains(lq.states, info.State)) {
			continue
		}
		out = append(out, info)
	}
	if claims.Continue != "" {
		w.Header().Set("X-Next-Token", claims.Continue)
	}
	writeJSON(w, http.StatusOK, out)
}

func matches(have, want map[string]string) bool {
	for k, v := range want {
		if got, ok := have[k]; !ok || got != v {
			return false
		}
	}
	return true
}
