package policy

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
)

// TestUnrenderableMembersAreReported: a pool whose members cannot be
// rendered (their names, taken from the pool's, cannot name the Service the
// template asks for) and
// a claim whose cold Sandbox cannot be, say so in their Ready condition and
// create nothing, instead of retrying the same failure forever.
func TestUnrenderableMembersAreReported(t *testing.T) {
	ns := env.Namespace(t)
	ctx := context.Background()
	tmpl := &extv1beta1.SandboxTemplate{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tpl"},
		Spec: extv1beta1.SandboxTemplateSpec{PodTemplate: sandboxv1beta1.PodTemplate{Spec: podSpec(gvisor)},
			Service: ptr.To(true)},
	}
	pool := &extv1beta1.SandboxWarmPool{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "9pool"},
		Spec:       extv1beta1.SandboxWarmPoolSpec{Replicas: ptr.To[int32](2), TemplateRef: extv1beta1.SandboxTemplateRef{Name: "tpl"}},
	}
	claim := &extv1beta1.SandboxClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "9claim"},
		Spec:       extv1beta1.SandboxClaimSpec{WarmPoolRef: extv1beta1.SandboxWarmPoolRef{Name: "9pool"}},
	}
	for _, o := range []client.Object{tmpl, pool, claim} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	reason := func(o client.Object, conds func() []metav1.Condition) func() error {
		return func() error {
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(o), o); err != nil {
				return err
			}
			c := meta.FindStatusCondition(conds(), extv1beta1.ConditionReady)
			if c == nil || c.Reason != extv1beta1.ReasonReconcilerError || !strings.Contains(c.Message, "rendering") {
				return fmt.Errorf("Ready is %+v", c)
			}
			return nil
		}
	}
	eventually(t, "pool reports members it cannot render", reason(pool, func() []metav1.Condition { return pool.Status.Conditions }))
	eventually(t, "claim reports the Sandbox it cannot render", reason(claim, func() []metav1.Condition { return claim.Status.Conditions }))
	var list sandboxv1beta1.SandboxList
	if err := env.Client.List(ctx, &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 0 {
		t.Fatalf("%d Sandboxes made though none can be rendered", len(list.Items))
	}
}
