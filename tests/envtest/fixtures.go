package envtest

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
)

// CreatePool creates, in ns, a SandboxTemplate named name+"-template" with
// one container (image runtime:1) and a SandboxWarmPool named name of
// replicas members made from it (none: every claim cold-starts).
func (e *Env) CreatePool(t testing.TB, ns, name string, replicas int32) {
	t.Helper()
	tmpl := &extv1beta1.SandboxTemplate{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-template"},
		Spec: extv1beta1.SandboxTemplateSpec{PodTemplate: sandboxv1beta1.PodTemplate{
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "runtime", Image: "runtime:1"}}},
		}},
	}
	pool := &extv1beta1.SandboxWarmPool{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: extv1beta1.SandboxWarmPoolSpec{
			Replicas: ptr.To(replicas), TemplateRef: extv1beta1.SandboxTemplateRef{Name: tmpl.Name},
		},
	}
	for _, o := range []client.Object{tmpl, pool} {
		if err := e.Client.Create(t.Context(), o); err != nil {
			t.Fatal(err)
		}
	}
}

// EnsureGVisor makes the cluster-wide RuntimeClass gvisor (handler runsc)
// unless it exists: runtime isolation is enforced by default, so sandbox
// Pods name it, and the API server's RuntimeClass admission wants it.
func (e *Env) EnsureGVisor(ctx context.Context) error {
	rc := &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "gvisor"}, Handler: "runsc"}
	if err := e.Client.Create(ctx, rc); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating RuntimeClass gvisor: %w", err)
	}
	return nil
}
