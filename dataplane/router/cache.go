package router

import (
	"context"
	"fmt"
	"net/http"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
)

// CacheOptions configure NewCache.
type CacheOptions struct {
	// Namespaces limits the cache to these namespaces; empty means all.
	Namespaces []string
	// HTTPClient, if set, is the client the cache's watches use.
	HTTPClient *http.Client
	// OnPodGone is called with the UID of every sandbox Pod deleted from
	// the cluster (the port-forward transport drops its connection).
	OnPodGone func(types.UID)
	// OnPoolPod is called on every sandbox Pod added or changed with
	// whether it is a Ready, unclaimed warm pool member's Pod: labelled so
	// (the warm-pool-sandbox label goes once a claim takes the member) and
	// controlled by a Sandbox in the cache that a SandboxWarmPool controls.
	// The port-forward transport connects to those ahead of their first
	// request.
	OnPoolPod func(p *corev1.Pod, unclaimedReady bool)
	// Claims adds SandboxClaims to the cache, trimmed by TrimClaim (their
	// reader is the E2B front door's).
	Claims bool
	// TrimClaim reduces a cached SandboxClaim; nil keeps it whole.
	TrimClaim func(any) (any, error)
	// Changes, if set, is told of every Sandbox and Pod event (and, with
	// Claims, SandboxClaim event) the cache takes in.
	Changes *Changes
}

// NewCache returns a watch cache of what the router reads, no more:
// Sandboxes reduced to what routing and resume read (trimSandbox) and
// indexed by their claim's UID (IndexClaimUID), and Pods with the sandbox-name-hash label, reduced
// to their identity, owners and status (and, with Claims, SandboxClaims). Its informers are registered, so
// Start and WaitForCacheSync cover them; reading anything else fails.
func NewCache(ctx context.Context, cfg *rest.Config, o CacheOptions) (cache.Cache, error) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := sandboxv1beta1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := extv1beta1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	hasHash, err := labels.NewRequirement(sandboxv1beta1.LabelSandboxNameHash, selection.Exists, nil)
	if err != nil {
		return nil, err
	}
	sandbox := &sandboxv1beta1.Sandbox{}
	opts := cache.Options{
		Scheme:                       scheme,
		HTTPClient:                   o.HTTPClient,
		ReaderFailOnMissingInformer:  true,
		DefaultUnsafeDisableDeepCopy: ptr.To(true), // read-only: nothing is changed in place
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Pod{}: {Label: labels.NewSelector().Add(*hasHash), Transform: trimPod},
			sandbox:       {Transform: trimSandbox},
		},
	}
	if o.Claims {
		opts.ByObject[&extv1beta1.SandboxClaim{}] = cache.ByObject{Transform: o.TrimClaim}
	}
	if len(o.Namespaces) > 0 {
		opts.DefaultNamespaces = map[string]cache.Config{}
		for _, ns := range o.Namespaces {
			opts.DefaultNamespaces[ns] = cache.Config{}
		}
	}
	c, err := cache.New(cfg, opts)
	if err != nil {
		return nil, fmt.Errorf("router cache: %w", err)
	}
	if err := c.IndexField(ctx, sandbox, IndexClaimUID, ClaimUIDIndex); err != nil {
		return nil, fmt.Errorf("router cache: sandboxes (is the Sandbox CRD installed?): %w", err)
	}
	sandboxes, err := c.GetInformer(ctx, sandbox)
	if err != nil {
		return nil, fmt.Errorf("router cache: sandboxes (is the Sandbox CRD installed?): %w", err)
	}
	var claims cache.Informer
	if o.Claims {
		if claims, err = c.GetInformer(ctx, &extv1beta1.SandboxClaim{}); err != nil {
			return nil, fmt.Errorf("router cache: sandboxclaims (is the SandboxClaim CRD installed?): %w", err)
		}
	}
	pods, err := c.GetInformer(ctx, &corev1.Pod{})
	if err != nil {
		return nil, fmt.Errorf("router cache: pods: %w", err)
	}
	if o.Changes != nil {
		for _, inf := range []cache.Informer{sandboxes, pods, claims} {
			if inf == nil {
				continue
			}
			if _, err := inf.AddEventHandler(o.Changes.handler()); err != nil {
				return nil, fmt.Errorf("router cache: change events: %w", err)
			}
		}
	}
	if o.OnPodGone != nil {
		if _, err := pods.AddEventHandler(toolscache.ResourceEventHandlerFuncs{DeleteFunc: func(obj any) {
			if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if p, ok := obj.(*corev1.Pod); ok {
				o.OnPodGone(p.UID)
			}
		}}); err != nil {
			return nil, fmt.Errorf("router cache: pod events: %w", err)
		}
	}
	if o.OnPoolPod != nil {
		onPod := func(obj any) {
			if p, ok := obj.(*corev1.Pod); ok {
				o.OnPoolPod(p, unclaimedReadyMember(p) && memberControls(ctx, c, p))
			}
		}
		if _, err := pods.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc: onPod, UpdateFunc: func(_, obj any) { onPod(obj) },
		}); err != nil {
			return nil, fmt.Errorf("router cache: pod events: %w", err)
		}
	}
	return c, nil
}

// memberControls tells whether p's controller, by API group, kind, name
// and UID, is a Sandbox in the cache that a SandboxWarmPool controls and no
// claim has taken: labels alone are anyone's to set on their own Pod.
func memberControls(ctx context.Context, r client.Reader, p *corev1.Pod) bool {
	ref := sandboxv1beta1.ControllerOf(p, sandboxv1beta1.SandboxKind)
	if ref == nil {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	sb := &sandboxv1beta1.Sandbox{}
	if err := r.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: ref.Name}, sb); err != nil {
		return false
	}
	return sandboxv1beta1.IsControlledBy(p, sb, sandboxv1beta1.SandboxKind) && extv1beta1.PoolOf(sb) != nil && extv1beta1.IsUnclaimedWarmMember(sb)
}

// unclaimedReadyMember tells whether p is a warm pool member's Pod that is
// Ready and not being deleted, its member not yet taken by a claim.
func unclaimedReadyMember(p *corev1.Pod) bool {
	return p.Labels[sandboxv1beta1.LabelWarmPoolSandbox] != "" && p.DeletionTimestamp == nil &&
		p.Status.Phase == corev1.PodRunning && podReady(p)
}

// trimPod keeps of a Pod what routing reads (and its warm-pool label), so that a cluster with many
// sandboxes costs the router little memory.
func trimPod(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	out := &corev1.Pod{
		TypeMeta: p.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Name: p.Name, Namespace: p.Namespace, UID: p.UID, ResourceVersion: p.ResourceVersion,
			OwnerReferences:   p.OwnerReferences,
			DeletionTimestamp: p.DeletionTimestamp,
		},
		Status: corev1.PodStatus{Phase: p.Status.Phase, PodIP: p.Status.PodIP, PodIPs: p.Status.PodIPs},
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			out.Status.Conditions = []corev1.PodCondition{{Type: c.Type, Status: c.Status}}
		}
	}
	if v := p.Labels[sandboxv1beta1.LabelWarmPoolSandbox]; v != "" { // an unclaimed member's
		out.Labels = map[string]string{sandboxv1beta1.LabelWarmPoolSandbox: v}
	}
	return out, nil
}

// trimSandbox keeps of a Sandbox what routing and resume on connect read:
// its identity, owners and deletion, the pod-name annotation, the warm-pool
// label, the two resume opt-in annotations and spec.operatingMode (never
// the pod template, volumes or status: memory).
func trimSandbox(obj any) (any, error) {
	sb, ok := obj.(*sandboxv1beta1.Sandbox)
	if !ok {
		return obj, nil
	}
	out := &sandboxv1beta1.Sandbox{
		TypeMeta: sb.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Name: sb.Name, Namespace: sb.Namespace, UID: sb.UID, ResourceVersion: sb.ResourceVersion,
			OwnerReferences:   sb.OwnerReferences,
			DeletionTimestamp: sb.DeletionTimestamp,
		},
		Spec: sandboxv1beta1.SandboxSpec{OperatingMode: sb.Spec.OperatingMode},
	}
	for _, k := range []string{sandboxv1beta1.AnnotationPodName, sandboxv1beta1.AnnotationResumeOnConnect, sandboxv1beta1.AnnotationIdleTimeout} {
		if v, ok := sb.Annotations[k]; ok {
			if out.Annotations == nil {
				out.Annotations = map[string]string{}
			}
			out.Annotations[k] = v
		}
	}
	if v := sb.Labels[sandboxv1beta1.LabelWarmPoolSandbox]; v != "" {
		out.Labels = map[string]string{sandboxv1beta1.LabelWarmPoolSandbox: v}
	}
	return out, nil
}
