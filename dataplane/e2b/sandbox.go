package e2b

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	"github.com/agentsandbox/reconciler/dataplane/router"
)

// notFound is the answer for an ID that names no sandbox of the caller's:
// malformed, of another namespace, unknown, or a claim not made through
// this API (all alike, so that nothing about other tenants shows).
func notFound(id string) *apiError {
	return errorf(http.StatusNotFound, "sandbox %.100q not found", id)
}

// claimFor authenticates r, checks the caller's right to verb (and exec,
// per n) on the claim the path's ID names, and reads the claim fresh.
func (s *Server) claimFor(r *http.Request, verb string, n needs) (*caller, *extv1beta1.SandboxClaim, *apiError) {
	ctx := r.Context()
	c, e := s.authenticate(ctx, r)
	if e != nil {
		return nil, nil, e
	}
	id := r.PathValue("id")
	ns, name, err := ParseID(id)
	if err != nil || ns != c.namespace {
		return nil, nil, notFound(id)
	}
	if e := s.allow(ctx, c, verb, name, n); e != nil {
		return nil, nil, e
	}
	var claim extv1beta1.SandboxClaim
	if err := s.o.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &claim); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil, notFound(id)
		}
		return nil, nil, s.apiFailure("reading the SandboxClaim", err)
	}
	if !isE2BClaim(&claim) || claim.DeletionTimestamp != nil {
		return nil, nil, notFound(id)
	}
	return c, &claim, nil
}

// sandboxOf is the claim's Sandbox from the cache, if it is bound and
// controlled by the claim (else nil).
func (s *Server) sandboxOf(ctx context.Context, claim *extv1beta1.SandboxClaim) *sandboxv1beta1.Sandbox {
	if claim.Status.Sandbox.Name == "" {
		return nil
	}
	var sb sandboxv1beta1.Sandbox
	if err := s.o.Cache.Get(ctx, types.NamespacedName{Namespace: claim.Namespace, Name: claim.Status.Sandbox.Name}, &sb); err != nil {
		return nil
	}
	if ref := extv1beta1.ClaimOf(&sb); ref == nil || ref.UID != claim.UID {
		return nil
	}
	return &sb
}

func (s *Server) describe(ctx context.Context, c *extv1beta1.SandboxClaim) sandboxInfo {
	id, _ := SandboxID(c.Namespace, c.Name)
	start, end := times(c)
	md := metadataOf(c)
	return sandboxInfo{SandboxID: id, TemplateID: c.Annotations[AnnotationTemplateID], ClientID: ClientID,
		StartedAt: start, EndAt: end, State: stateOf(s.sandboxOf(ctx, c)), EnvdVersion: s.o.EnvdVersion, Metadata: md}
}

// info serves GET /sandboxes/{id}.
func (s *Server) info(w http.ResponseWriter, r *http.Request) {
	_, claim, e := s.claimFor(r, "get", withExec)
	if e != nil {
		writeAPIError(w, e)
		return
	}
	out := s.describe(r.Context(), claim)
	out.EnvdAccessToken = s.o.Tokens.For(claim.Namespace, claim.Name, claim.UID)
	writeJSON(w, http.StatusOK, out)
}

// metrics serves GET /sandboxes/{id}/metrics: none are measured.
func (s *Server) metrics(w http.ResponseWriter, r *http.Request) {
	if _, _, e := s.claimFor(r, "get", claimsOnly); e != nil {
		writeAPIError(w, e)
		return
	}
	writeJSON(w, http.StatusOK, []any{})
}

// kill serves DELETE /sandboxes/{id}: the claim is deleted, guarded by
// the UID read (its Sandbox, and the Pod, follow by garbage collection).
func (s *Server) kill(w http.ResponseWriter, r *http.Request) {
	_, claim, e := s.claimFor(r, "delete", claimsOnly)
	if e != nil {
		writeAPIError(w, e)
		return
	}
	uid := claim.UID
	err := s.o.Client.Delete(r.Context(), claim, client.Preconditions{UID: &uid}, client.PropagationPolicy(metav1.DeletePropagationBackground))
	switch {
	case apierrors.IsNotFound(err), apierrors.IsConflict(err): // gone, or replaced by a namesake
		writeAPIError(w, notFound(r.PathValue("id")))
	case err != nil:
		writeAPIError(w, s.apiFailure("deleting the SandboxClaim", err))
	default:
		w.WriteHeader(http.StatusNoContent)
	}
}

type timeoutRequest struct {
	Timeout *int64 `json:"timeout"`
}

// setTimeout serves POST /sandboxes/{id}/timeout: the claim's shutdown
// time becomes now plus the timeout (earlier or later).
func (s *Server) setTimeout(w http.ResponseWriter, r *http.Request) {
	_, claim, e := s.claimFor(r, "update", claimsOnly)
	var req timeoutRequest
	if e == nil {
		e = decodeBody(r, &req)
	}
	if e == nil && req.Timeout == nil {
		e = errorf(http.StatusBadRequest, "timeout is required")
	}
	if e == nil {
		e = s.checkTimeout(*req.Timeout)
	}
	if e == nil {
		e = s.moveShutdown(r.Context(), claim, time.Now().Add(time.Duration(*req.Timeout)*time.Second), false)
	}
	if e != nil {
		writeAPIError(w, e)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// moveShutdown sets the claim's shutdown time to end (with onlyLater,
// only if that is later), with policy Delete; each update is guarded by
// the resourceVersion read, and retried on a conflict with the same UID.
func (s *Server) moveShutdown(ctx context.Context, claim *extv1beta1.SandboxClaim, end time.Time, onlyLater bool) *apiError {
	uid, first := claim.UID, true
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if !first {
			if err := s.o.Client.Get(ctx, client.ObjectKeyFromObject(claim), claim); err != nil {
				return err
			}
			if claim.UID != uid {
				return apierrors.NewNotFound(extv1beta1.GroupVersion.WithResource("sandboxclaims").GroupResource(), claim.Name)
			}
		}
		first = false
		lc := claim.Spec.Lifecycle
		if lc == nil {
			lc = &extv1beta1.Lifecycle{}
		}
		if onlyLater && lc.ShutdownTime != nil && !lc.ShutdownTime.Time.Before(end) {
			return nil
		}
		lc.ShutdownTime = ptr.To(metav1.NewTime(end.Truncate(time.Second)))
		lc.ShutdownPolicy = extv1beta1.ShutdownPolicyDelete
		claim.Spec.Lifecycle = lc
		return s.o.Client.Update(ctx, claim)
	})
	if apierrors.IsNotFound(err) {
		id, _ := SandboxID(claim.Namespace, claim.Name)
		return notFound(id)
	}
	if err != nil {
		return s.apiFailure("updating the SandboxClaim", err)
	}
	return nil
}

// setMode applies spec.operatingMode to the Sandbox key names, guarded by
// its UID, under the field manager of idle suspend and resume on connect.
func (s *Server) setMode(ctx context.Context, ns, name string, uid types.UID, mode sandboxv1beta1.SandboxOperatingMode) error {
	body, err := json.Marshal(map[string]any{
		"apiVersion": sandboxv1beta1.GroupVersion.String(), "kind": "Sandbox",
		"metadata": map[string]any{"name": name, "namespace": ns, "uid": string(uid)},
		"spec":     map[string]any{"operatingMode": string(mode)},
	})
	if err != nil {
		return err
	}
	return s.o.Sandboxes.Patch(types.ApplyPatchType).Namespace(ns).Resource("sandboxes").Name(name).
		VersionedParams(&metav1.PatchOptions{FieldManager: sandboxv1beta1.FieldManagerOperatingMode, Force: ptr.To(true)}, metav1.ParameterCodec).
		Body(body).Do(ctx).Error()
}

// pause serves POST /sandboxes/{id}/pause: the claim's Sandbox is set
// Suspended (its Pod goes; the Sandbox, its Service and PVCs stay) and the
// answer waits until the Pod is gone; 409 if it is paused already.
func (s *Server) pause(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	_, claim, e := s.claimFor(r, "update", withExec)
	if e != nil {
		writeAPIError(w, e)
		return
	}
	id := r.PathValue("id")
	sb := s.sandboxOf(ctx, claim)
	switch {
	case sb == nil:
		writeAPIError(w, errorf(http.StatusConflict, "sandbox %s is not running yet", id))
		return
	case sb.Spec.OperatingMode == sandboxv1beta1.SandboxOperatingModeSuspended:
		writeAPIError(w, errorf(http.StatusConflict, "sandbox %s is already paused", id))
		return
	}
	if err := s.setMode(ctx, sb.Namespace, sb.Name, sb.UID, sandboxv1beta1.SandboxOperatingModeSuspended); err != nil {
		writeAPIError(w, s.apiFailure("pausing the Sandbox", err))
		return
	}
	wctx, cancel := context.WithTimeout(ctx, s.o.ReadyTimeout)
	defer cancel()
	for {
		changed := s.o.Changes.Wait()
		var pod corev1.Pod
		err := s.o.Cache.Get(wctx, types.NamespacedName{Namespace: sb.Namespace, Name: router.PodName(sb)}, &pod)
		if apierrors.IsNotFound(err) || (err == nil && !sandboxv1beta1.IsControlledBy(&pod, sb, sandboxv1beta1.SandboxKind)) {
			break
		}
		if !router.Pause(wctx, changed, pollInterval) {
			writeAPIError(w, errorf(http.StatusGatewayTimeout, "sandbox %s was paused but its pod did not stop within %s", id, s.o.ReadyTimeout))
			return
		}
	}
	w.WriteHeader(http.StatusNoContent)
}

type connectRequest struct {
	Timeout *int64 `json:"timeout"`
}

// connect serves POST /v2/sandboxes/{id}/connect (and the older
// /sandboxes/{id}/connect and /resume): a paused sandbox is resumed, the
// timeout is extended (never shortened), and the answer waits until the
// sandbox is routable: 201 when it was resumed, else 200.
func (s *Server) connect(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	_, claim, e := s.claimFor(r, "update", withExec)
	var req connectRequest
	if e == nil {
		e = decodeBody(r, &req)
	}
	if e == nil && req.Timeout != nil {
		if e = s.checkTimeout(*req.Timeout); e == nil {
			e = s.moveShutdown(ctx, claim, time.Now().Add(time.Duration(*req.Timeout)*time.Second), true)
		}
	}
	status := http.StatusOK
	if e == nil {
		var resumed bool
		resumed, e = s.resume(ctx, claim)
		if resumed {
			status = http.StatusCreated
		}
	}
	if e != nil {
		writeAPIError(w, e)
		return
	}
	writeJSON(w, status, s.handle(claim))
}

// resume sets the claim's Sandbox Running if it is Suspended and waits
// until it is routable and its daemon answers (ReadyTimeout).
func (s *Server) resume(ctx context.Context, claim *extv1beta1.SandboxClaim) (bool, *apiError) {
	id, _ := SandboxID(claim.Namespace, claim.Name)
	wctx, cancel := context.WithTimeout(ctx, s.o.ReadyTimeout)
	defer cancel()
	resumed := false
	for {
		changed := s.o.Changes.Wait()
		sb := s.sandboxOf(wctx, claim)
		if sb != nil && sb.Spec.OperatingMode == sandboxv1beta1.SandboxOperatingModeSuspended && !resumed {
			if err := s.setMode(wctx, sb.Namespace, sb.Name, sb.UID, sandboxv1beta1.SandboxOperatingModeRunning); err != nil {
				return false, s.apiFailure("resuming the Sandbox", err)
			}
			resumed = true
		}
		if sb != nil && sb.Spec.OperatingMode != sandboxv1beta1.SandboxOperatingModeSuspended {
			var pod corev1.Pod
			p := &pod
			if err := s.o.Cache.Get(wctx, types.NamespacedName{Namespace: sb.Namespace, Name: router.PodName(sb)}, &pod); err != nil {
				p = nil
			}
			if _, rerr := router.Route(sb, p, router.Target{ID: sb.Name, Namespace: sb.Namespace, Port: 1, ClaimUID: claim.UID}); rerr == nil {
				if s.healthy(wctx, claim, sb) {
					return resumed, nil
				}
				// Routable, its runtime still starting: no change of
				// the cache tells when it answers; poll.
				changed = nil
			}
		}
		if !router.Pause(wctx, changed, pollInterval) {
			return resumed, errorf(http.StatusGatewayTimeout, "sandbox %s did not become ready within %s", id, s.o.ReadyTimeout)
		}
	}
}
