package envtest

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/agentsandbox/reconciler/render"
)

// UnderNamespacePolicy reports whether the namespace's default-deny
// NetworkPolicy (render.NamespaceNetworkPolicyName) selects the Pod named
// pod in ns: false when there is none, an error when one of that name is
// not owned by the Namespace (by UID).
func (e *Env) UnderNamespacePolicy(ctx context.Context, ns, pod string) (bool, error) {
	p := &corev1.Pod{}
	if err := e.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: pod}, p); err != nil {
		return false, err
	}
	np := &networkingv1.NetworkPolicy{}
	switch err := e.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: render.NamespaceNetworkPolicyName}, np); {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, err
	}
	nsObj := &corev1.Namespace{}
	if err := e.Client.Get(ctx, types.NamespacedName{Name: ns}, nsObj); err != nil {
		return false, err
	}
	if !render.OwnedByNamespace(np, nsObj.UID) {
		return false, fmt.Errorf("owners %+v, want the Namespace %s (uid %s)", np.OwnerReferences, ns, nsObj.UID)
	}
	sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
	if err != nil {
		return false, err
	}
	return sel.Matches(labels.Set(p.Labels)), nil
}
