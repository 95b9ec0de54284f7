package controllers

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
)

// IndexController indexes objects by their controller reference: its API
// group, kind, name and UID (sandboxv1beta1.ControllerKeyOf). A reference
// that copies an owner's UID under another group or kind is filed under
// another key, so it never lists among the owner's objects. Pods named
// after their Sandbox are left out (podControllerKey).
const IndexController = ".metadata.controller"

func controllerKey(o client.Object) []string {
	if k := sandboxv1beta1.ControllerKeyOf(o); k != "" {
		return []string{k}
	}
	return nil
}

// podControllerKey is controllerKey for Pods, except that a Pod named after
// the Sandbox that controls it (every Pod the controller makes) is filed
// under no key: it is read by name instead (podsControlledBy). An index
// entry is a small set of its own, twice over (controller-runtime files
// each under its namespace and under all namespaces), for every Pod. The
// name decides only where a Pod is filed; whether a Sandbox controls it is
// decided on group, kind, name and UID when it is read.
func podControllerKey(o client.Object) []string {
	if ref := sandboxv1beta1.ControllerOf(o, sandboxv1beta1.SandboxKind); ref != nil && ref.Name == o.GetName() {
		return nil
	}
	return controllerKey(o)
}

// podsControlledBy returns the Pods sb controls: the one named after it,
// read by name, and any other (a Pod adopted under another name), from
// IndexController (podControllerKey). named is the Pod of sb's name when
// sb does not control it (unowned, or another's), nil when there is none.
func podsControlledBy(ctx context.Context, c client.Reader, sb *sandboxv1beta1.Sandbox) (pods []*corev1.Pod, named *corev1.Pod, err error) {
	var list corev1.PodList
	if err := c.List(ctx, &list, client.InNamespace(sb.Namespace), controlledBy(sb, sandboxv1beta1.SandboxKind)); err != nil {
		return nil, nil, err
	}
	pods = make([]*corev1.Pod, 0, len(list.Items)+1)
	p := &corev1.Pod{}
	switch err := c.Get(ctx, client.ObjectKeyFromObject(sb), p); {
	case apierrors.IsNotFound(err):
	case err != nil:
		return nil, nil, err
	case sandboxv1beta1.IsControlledBy(p, sb, sandboxv1beta1.SandboxKind):
		pods = append(pods, p)
	default:
		named = p
	}
	for i := range list.Items {
		pods = append(pods, &list.Items[i])
	}
	return pods, named, nil
}

// controlledBy selects, in IndexController, the objects owner (of kind gk)
// controls.
func controlledBy(owner client.Object, gk schema.GroupKind) client.MatchingFields {
	return client.MatchingFields{IndexController: sandboxv1beta1.ControllerKey(gk, owner.GetName(), owner.GetUID())}
}

// CacheOptions returns the cache options the reconcilers rely on.
//
// Pods that are not ours (no Sandbox controller, no sandbox label) are kept
// as bare metadata, so a cluster full of unrelated Pods costs little memory
// while name clashes and adoptable Pods stay visible without extra API
// requests; of ours, the status keeps what the reconcilers read.
//
// Sandboxes, their Pods and Services, NetworkPolicies (one per Sandbox in
// earlier releases) and claims keep only the managedFields entries of managers,
// the controller's own: all the reconcilers read of them (what our
// managers own, for extraction and for "already applied"). The rest
// (kubelet's or kwok's status entry of a Pod, the creator's entry of a
// Sandbox) was half of what each cached object cost. A cached object is
// therefore never the source of a whole managedFields list: an ownership
// upgrade (ssa.Engine.UpgradeOwnership) is made from an object read past
// the cache. nil managers keeps every entry. What cached objects repeat is
// one copy: the kept entries' strings (managedStrings) and the Pod
// template spec of Sandboxes made from one template or made alike without
// one (podSpecs); cached
// objects are therefore read-only, as controller-runtime's deep copies
// make them for every reader but UnsafeDisableDeepCopy lists.
func CacheOptions(managers []string) cache.Options {
	trim := keepManagedFields(managers)
	return cache.Options{
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Pod{}: {Transform: func(obj any) (any, error) {
				obj, err := TrimForeignPod(obj)
				if err != nil {
					return nil, err
				}
				return trim(obj)
			}},
			&corev1.Service{}:             {Transform: trim},
			&networkingv1.NetworkPolicy{}: {Transform: trim},
			&sandboxv1beta1.Sandbox{}:     {Transform: shareSpecs(trim)},
			&extv1beta1.SandboxClaim{}:    {Transform: trim},
		},
	}
}

// shareSpecs is next followed by a transform that shares the Pod template
// spec of Sandboxes that repeat one (podSpecs).
func shareSpecs(next toolscache.TransformFunc) toolscache.TransformFunc {
	specs := newPodSpecs()
	return func(obj any) (any, error) {
		obj, err := next(obj)
		if sb, ok := obj.(*sandboxv1beta1.Sandbox); ok && err == nil {
			specs.share(sb)
		}
		return obj, err
	}
}

// keepManagedFields is a cache transform that keeps only the managedFields
// entries of managers (all of them when managers is nil).
// The entries kept share their strings with those of other cached objects
// (managedStrings).
func keepManagedFields(managers []string) toolscache.TransformFunc {
	shared := newManagedStrings()
	return func(obj any) (any, error) {
		o, ok := obj.(client.Object)
		if !ok || managers == nil {
			// Tombstones and other values pass through unchanged.
			return obj, nil
		}
		entries := o.GetManagedFields()
		kept := entries[:0]
		for _, m := range entries {
			for _, name := range managers {
				if m.Manager == name {
					kept = append(kept, m)
					break
				}
			}
		}
		if len(kept) < len(entries) {
			// A fresh slice: the dropped entries' memory is released.
			kept = append([]metav1.ManagedFieldsEntry(nil), kept...)
			o.SetManagedFields(kept)
		}
		shared.entries(kept)
		return obj, nil
	}
}

// TrimForeignPod is a cache transform that reduces Pods unrelated to
// Sandboxes to the metadata the reconcilers look at, and a sandbox Pod's
// status to what they read of it: its phase, conditions, IPs, reason and
// message (its container statuses, host IPs, start time and QoS class,
// which kubelet keeps current, are read by none).
func TrimForeignPod(obj any) (any, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		// Tombstones and other values pass through unchanged.
		return obj, nil
	}
	if isSandboxPod(pod) {
		st := &pod.Status
		pod.Status = corev1.PodStatus{Phase: st.Phase, Conditions: st.Conditions, PodIP: st.PodIP, PodIPs: st.PodIPs,
			Reason: st.Reason, Message: st.Message}
		return pod, nil
	}
	return &corev1.Pod{
		TypeMeta: pod.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Name: pod.Name, Namespace: pod.Namespace, UID: pod.UID,
			ResourceVersion: pod.ResourceVersion, Labels: pod.Labels,
			OwnerReferences: pod.OwnerReferences, DeletionTimestamp: pod.DeletionTimestamp,
		},
	}, nil
}

func isSandboxPod(p *corev1.Pod) bool {
	if _, ok := p.Labels[sandboxv1beta1.LabelSandboxNameHash]; ok {
		return true
	}
	if p.Labels[sandboxv1beta1.LabelAdoptable] == sandboxv1beta1.AdoptableValue {
		return true
	}
	if sandboxv1beta1.ControllerOf(p, sandboxv1beta1.SandboxKind) != nil {
		return true
	}
	return false
}

// OwnManagers are the field managers whose managedFields entries the cache
// keeps for a controller running as fieldManager: that manager, its
// status and annotation managers (ssa.Engine), and the operating-mode and
// activity managers it shares with the router and the SDK.
func OwnManagers(fieldManager string) []string {
	return []string{fieldManager, fieldManager + "-status", fieldManager + "-annotations",
		sandboxv1beta1.FieldManagerOperatingMode, sandboxv1beta1.FieldManagerActivity}
}
