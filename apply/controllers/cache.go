package controllers

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
)

// IndexControllerUID indexes objects by the UID of their controller owner.
const IndexControllerUID = ".metadata.controllerUID"

func controllerUID(o client.Object) []string {
	if ref := metav1.GetControllerOfNoCopy(o); ref != nil {
		return []string{string(ref.UID)}
	}
	return nil
}

// CacheOptions returns the cache options the reconcilers rely on: Pods that
// are not ours (no Sandbox controller, no sandbox label) are kept as bare
// metadata, so a cluster full of unrelated Pods costs little memory while
// name clashes and adoptable Pods stay visible without extra API requests.
func CacheOptions() cache.Options {
	return cache.Options{
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Pod{}: {Transform: TrimForeignPod},
		},
	}
}

// TrimForeignPod is a cache transform that reduces Pods unrelated to
// Sandboxes to the metadata the reconcilers look at.
func TrimForeignPod(obj any) (any, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		// Tombstones and other values pass through unchanged.
		return obj, nil
	}
	if isSandboxPod(pod) {
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
	if ref := metav1.GetControllerOfNoCopy(p); ref != nil && ref.Kind == "Sandbox" {
		return true
	}
	return false
}
