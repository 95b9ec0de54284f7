package client

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	sdk "github.com/agentsandbox/reconciler/dataplane/client"
)

// TestOpenClaimRefusesASandboxTheClaimDoesNotControl: a claim's status
// names its Sandbox, but a name is not an identity. When the claim's
// Sandbox is gone and someone makes another of the same name, Open of the
// claim must not connect to it: the SDK checks that the claim controls the
// Sandbox (API group, kind, name and UID).
func TestOpenClaimRefusesASandboxTheClaimDoesNotControl(t *testing.T) {
	ns := env.Namespace(t)
	env.StartKubelet(t, ns)
	env.CreatePool(t, ns, "pool", 1)
	ctx := ctxFor(t)
	claim := &extv1beta1.SandboxClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "job"},
		Spec: extv1beta1.SandboxClaimSpec{WarmPoolRef: extv1beta1.SandboxWarmPoolRef{Name: "pool"}}}
	if err := env.Client.Create(ctx, claim); err != nil {
		t.Fatal(err)
	}
	var bound string
	waitUntil(t, "the claim is bound", func() error {
		if err := env.Client.Get(ctx, crclient.ObjectKeyFromObject(claim), claim); err != nil {
			return err
		}
		if bound = claim.Status.Sandbox.Name; bound == "" {
			return errors.New("not bound yet")
		}
		return nil
	})
	old := &sandboxv1beta1.Sandbox{}
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: bound}, old); err != nil {
		t.Fatal(err)
	}
	// The claim's Sandbox goes (the claim does not rebind: it reports it
	// missing) and a stranger's takes its name.
	if err := env.Client.Delete(ctx, old, crclient.Preconditions{UID: &old.UID}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the claim's Sandbox is gone", func() error {
		err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: bound}, &sandboxv1beta1.Sandbox{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there (%w)", err)
	})
	stranger := &sandboxv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: bound}}
	stranger.Spec.PodTemplate.Spec = corev1.PodSpec{RuntimeClassName: ptr.To("gvisor"), Containers: []corev1.Container{{Name: "runtime", Image: "runtime:1"}}}
	if err := env.Client.Create(ctx, stranger); err != nil {
		t.Fatal(err)
	}
	c, err := sdk.New(env.Config, sdk.WithBaseURL(runtime(t).URL), sdk.WithReadyTimeout(20*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	sb, err := c.Open(ctx, ns, "job")
	if err == nil {
		_ = sb.Close(ctx)
		t.Fatalf("Open of claim job connected to %s/%s, a Sandbox the claim does not control", sb.Namespace(), sb.Name())
	}
	if !errors.Is(err, sdk.ErrNotFound) || !strings.Contains(err.Error(), "not controlled by claim job") {
		t.Errorf("Open = %v; want ErrNotFound saying the claim does not control it", err)
	}
}

func waitUntil(t *testing.T, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(45 * time.Second)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
