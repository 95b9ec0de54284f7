package e2b

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	"github.com/agentsandbox/reconciler/dataplane/router"
)

// DefaultSandboxTimeout is a sandbox's lifetime when create names none
// (E2B's default).
const DefaultSandboxTimeout = 300 * time.Second

// maxBodyBytes bounds a control-plane request body.
const maxBodyBytes = 1 << 20

type autoResume struct {
	Enabled bool `json:"enabled"`
}

// createRequest is POST /v2/sandboxes's body (the fields served; others
// that would change what a sandbox is are refused, see unsupported).
type createRequest struct {
	TemplateID          string            `json:"templateID"`
	Timeout             *int64            `json:"timeout"`
	Metadata            map[string]string `json:"metadata"`
	EnvVars             map[string]string `json:"envVars"`
	AutoPause           *bool             `json:"autoPause"`
	AutoResume          *autoResume       `json:"autoResume"`
	AllowInternetAccess *bool             `json:"allow_internet_access"`
	Network             json.RawMessage   `json:"network"`
	VolumeMounts        json.RawMessage   `json:"volumeMounts"`
	MCP                 json.RawMessage   `json:"mcp"`
}

func (r *createRequest) timeout() time.Duration {
	if r.Timeout == nil {
		return DefaultSandboxTimeout
	}
	return time.Duration(*r.Timeout) * time.Second
}

// unsupported names a requested feature this router cannot honour (so
// the caller is told instead of silently getting something else).
func (r *createRequest) unsupported() string {
	switch {
	case r.AutoPause != nil && *r.AutoPause:
		return "autoPause (lifecycle.onTimeout 'pause'): a sandbox here is deleted at its timeout; pause it explicitly instead"
	case r.AllowInternetAccess != nil && !*r.AllowInternetAccess:
		return "allow_internet_access=false: egress is set by the SandboxTemplate's NetworkPolicy"
	case isSet(r.Network):
		return "network: egress is set by the SandboxTemplate's NetworkPolicy"
	case isSet(r.VolumeMounts):
		return "volumeMounts: volumes come from the SandboxTemplate"
	case isSet(r.MCP):
		return "mcp"
	}
	return ""
}

func isSet(raw json.RawMessage) bool {
	s := string(raw)
	return s != "" && s != "null" && s != "{}" && s != "[]"
}

func decodeBody(r *http.Request, v any) *apiError {
	dec := json.NewDecoder(http.MaxBytesReader(nil, r.Body, maxBodyBytes))
	// An empty body stands for {} (connect without options).
	if err := dec.Decode(v); err != nil && !errors.Is(err, io.EOF) {
		return errorf(http.StatusBadRequest, "invalid JSON body: %v", err)
	}
	return nil
}

func (s *Server) checkTimeout(sec int64) *apiError {
	if sec <= 0 || time.Duration(sec)*time.Second > s.o.MaxSandboxTimeout {
		return errorf(http.StatusBadRequest, "timeout must be between 1 and %d seconds", int64(s.o.MaxSandboxTimeout/time.Second))
	}
	return nil
}

// create serves POST /v2/sandboxes: a SandboxClaim on the warm pool
// templateID names (or the one pool of the SandboxTemplate it names), in
// the caller's namespace, answered once it is Ready.
func (s *Server) create(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	c, e := s.authenticate(ctx, r)
	if e == nil {
		e = s.allow(ctx, c, "create", "", withExec)
	}
	var req createRequest
	if e == nil {
		e = decodeBody(r, &req)
	}
	if e == nil {
		e = s.checkCreate(&req)
	}
	var env []extv1beta1.EnvVar
	if e == nil {
		var err error
		if env, err = checkEnv(req.EnvVars); err != nil {
			e = errorf(http.StatusBadRequest, "%v", err)
		}
	}
	var pool string
	if e == nil {
		pool, e = s.poolFor(ctx, c.namespace, req.TemplateID)
	}
	var claim *extv1beta1.SandboxClaim
	if e == nil {
		claim, e = s.createClaim(ctx, c.namespace, pool, &req, env)
	}
	if e == nil {
		e = s.awaitReady(ctx, claim)
	}
	if e != nil {
		writeAPIError(w, e)
		return
	}
	writeJSON(w, http.StatusCreated, s.handle(claim))
}

func (s *Server) checkCreate(req *createRequest) *apiError {
	if req.TemplateID == "" || len(validation.IsDNS1123Subdomain(req.TemplateID)) > 0 {
		return errorf(http.StatusBadRequest, "templateID %.80q is not the name of a SandboxWarmPool or SandboxTemplate", req.TemplateID)
	}
	if req.Timeout != nil {
		if e := s.checkTimeout(*req.Timeout); e != nil {
			return e
		}
	}
	if why := req.unsupported(); why != "" {
		return errorf(http.StatusBadRequest, "not supported by this router: %s", why)
	}
	if err := checkMetadata(req.Metadata); err != nil {
		return errorf(http.StatusBadRequest, "%v", err)
	}
	return nil
}

// poolFor is the warm pool a templateID names: the SandboxWarmPool of that
// name, else the pool of the SandboxTemplate of that name (the one named
// shadow-pool-<template> first, as v1alpha1 claims name it, else the
// first by name).
func (s *Server) poolFor(ctx context.Context, namespace, templateID string) (string, *apiError) {
	var pool extv1beta1.SandboxWarmPool
	err := s.o.Client.Get(ctx, types.NamespacedName{Namespace: namespace, Name: templateID}, &pool)
	if err == nil {
		return pool.Name, nil
	}
	if !apierrors.IsNotFound(err) {
		return "", s.apiFailure("reading SandboxWarmPool", err)
	}
	var pools extv1beta1.SandboxWarmPoolList
	if err := s.o.Client.List(ctx, &pools, client.InNamespace(namespace)); err != nil {
		return "", s.apiFailure("listing SandboxWarmPools", err)
	}
	var names []string
	for _, p := range pools.Items {
		if p.Spec.TemplateRef.Name == templateID && p.DeletionTimestamp == nil {
			names = append(names, p.Name)
		}
	}
	if len(names) == 0 {
		return "", errorf(http.StatusNotFound, "template %q not found: namespace %s has no SandboxWarmPool of that name and none of the SandboxTemplate of that name; create one (spec.sandboxTemplateRef.name %q, replicas: 0 for no warm sandboxes)", templateID, namespace, templateID)
	}
	slices.Sort(names)
	if shadow := "shadow-pool-" + templateID; slices.Contains(names, shadow) {
		return shadow, nil
	}
	return names[0], nil
}

func (s *Server) createClaim(ctx context.Context, namespace, pool string, req *createRequest, env []extv1beta1.EnvVar) (*extv1beta1.SandboxClaim, *apiError) {
	for range 3 { // a name taken by chance: another suffix
		suffix, err := newSuffix()
		if err != nil {
			return nil, errorf(http.StatusInternalServerError, "%v", err)
		}
		claim, err := newClaim(namespace, claimPrefix+suffix, pool, req, time.Now(), env)
		if err != nil {
			return nil, errorf(http.StatusBadRequest, "%v", err)
		}
		err = s.o.Client.Create(ctx, claim)
		if err == nil {
			return claim, nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return nil, s.apiFailure("creating the SandboxClaim", err)
		}
	}
	return nil, errorf(http.StatusServiceUnavailable, "could not find a free SandboxClaim name")
}

// awaitReady waits until claim is Ready (cold or warm), reading the
// cache. A claim that cannot become Ready, or is not within ReadyTimeout,
// is deleted (guarded by its UID) and the reason returned.
func (s *Server) awaitReady(ctx context.Context, claim *extv1beta1.SandboxClaim) *apiError {
	wctx, cancel := context.WithTimeout(ctx, s.o.ReadyTimeout)
	defer cancel()
	var why string
	for {
		changed := s.o.Changes.Wait()
		var cur extv1beta1.SandboxClaim
		err := s.o.Cache.Get(wctx, client.ObjectKeyFromObject(claim), &cur)
		if err == nil && cur.UID == claim.UID {
			ready, failed := claimState(&cur)
			if ready {
				*claim = cur
				return nil
			}
			if failed != "" {
				why = failed
				break
			}
			if cond := readyCondition(&cur); cond != nil {
				why = cond.Reason + ": " + cond.Message
			}
		}
		if wctx.Err() != nil {
			why = fmt.Sprintf("not ready within %s (%s)", s.o.ReadyTimeout, why)
			break
		}
		router.Pause(wctx, changed, pollInterval)
	}
	s.deleteClaim(context.WithoutCancel(ctx), claim)
	return errorf(http.StatusBadRequest, "sandbox could not be started: %s", why)
}

const pollInterval = 50 * time.Millisecond

// deleteClaim deletes the claim, only if it still has claim's UID.
func (s *Server) deleteClaim(ctx context.Context, claim *extv1beta1.SandboxClaim) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	uid := claim.UID
	err := s.o.Client.Delete(ctx, claim, client.Preconditions{UID: &uid}, client.PropagationPolicy(metav1.DeletePropagationBackground))
	if err != nil && !apierrors.IsNotFound(err) {
		s.o.Log.Error(err, "deleting a sandbox that did not start", "claim", claim.Namespace+"/"+claim.Name)
	}
}

// apiFailure is the answer for an API server error: its status where it
// is the caller's business, 502 otherwise (logged).
func (s *Server) apiFailure(what string, err error) *apiError {
	switch {
	case apierrors.IsForbidden(err):
		s.o.Log.Error(err, what)
		return errorf(http.StatusBadGateway, "%s: the router may not (check its RBAC: config/router/e2b)", what)
	case apierrors.IsInvalid(err), apierrors.IsBadRequest(err):
		return errorf(http.StatusBadRequest, "%s: %v", what, err)
	case apierrors.IsTooManyRequests(err):
		return errorf(http.StatusTooManyRequests, "%s: the API server is busy", what)
	}
	s.o.Log.Error(err, what)
	return errorf(http.StatusBadGateway, "%s failed", what)
}

// handle is create's and connect's answer for a Ready claim.
func (s *Server) handle(c *extv1beta1.SandboxClaim) sandboxInfo {
	id, _ := SandboxID(c.Namespace, c.Name)
	return sandboxInfo{SandboxID: id, TemplateID: c.Annotations[AnnotationTemplateID], ClientID: ClientID,
		EnvdVersion: s.o.EnvdVersion, EnvdAccessToken: s.o.Tokens.For(c.Namespace, c.Name, c.UID)}
}
