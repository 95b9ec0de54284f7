package extensions

import (
	"errors"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
)

// TestSecondSandboxOfABoundClaimGoes stands in for a concurrent controller
// that bound a claim a second time: a Sandbox the claim controls, besides
// the one its status names, is deleted by the claim's plan (guarded by UID
// and resourceVersion), and the bound Sandbox, the claim's status and its
// binding annotation stay.
func TestSecondSandboxOfABoundClaimGoes(t *testing.T) {
	ns := env.Namespace(t)
	env.StartKubelet(t, ns)
	create(t, newTemplate(ns, "tpl"), newPool(ns, "pool", "tpl", 0), newClaim(ns, "claim", "pool"))
	claim := waitClaim(t, ns, "claim", metav1.ConditionTrue, "")
	if claim.Status.Sandbox.Name != "claim" {
		t.Fatalf("bound to %q, want claim", claim.Status.Sandbox.Name)
	}
	second := &sandboxv1beta1.Sandbox{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "second", OwnerReferences: []metav1.OwnerReference{{
			APIVersion: extv1beta1.GroupVersion.String(), Kind: "SandboxClaim", Name: claim.Name, UID: claim.UID,
			Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}},
		Spec: sandboxv1beta1.SandboxSpec{SandboxBlueprint: sandboxv1beta1.SandboxBlueprint{
			PodTemplate: sandboxv1beta1.PodTemplate{Spec: corev1.PodSpec{
				RuntimeClassName: newTemplate(ns, "x").Spec.PodTemplate.Spec.RuntimeClassName,
				Containers:       []corev1.Container{{Name: "c", Image: "busybox"}},
			}},
		}},
	}
	create(t, second)
	eventually(t, "the second Sandbox goes", func() error {
		sb, err := get(t, ns, "second", &sandboxv1beta1.Sandbox{})
		switch {
		case apierrors.IsNotFound(err):
			return nil
		case err != nil:
			return err
		case sb.DeletionTimestamp != nil:
			return nil
		}
		return errors.New("still there")
	})
	if _, err := get(t, ns, "claim", &sandboxv1beta1.Sandbox{}); err != nil {
		t.Fatalf("the bound Sandbox: %v", err)
	}
	c, err := get(t, ns, "claim", &extv1beta1.SandboxClaim{})
	if err != nil {
		t.Fatal(err)
	}
	if c.Status.Sandbox.Name != "claim" || c.Annotations[extv1beta1.AnnotationSandboxName] != "claim" {
		t.Errorf("claim bound to %q, annotated %q; want claim", c.Status.Sandbox.Name, c.Annotations[extv1beta1.AnnotationSandboxName])
	}
	if r := findCondition(c.Status.Conditions, extv1beta1.ConditionReady); r == nil || r.Status != metav1.ConditionTrue {
		t.Errorf("claim Ready %s", fmt.Sprint(r))
	}
}
