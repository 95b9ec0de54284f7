package integration

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	"github.com/agentsandbox/reconciler/policy"
	"github.com/agentsandbox/reconciler/tests"
	"github.com/agentsandbox/reconciler/tests/cluster"
	"github.com/agentsandbox/reconciler/webhooks"
	"github.com/agentsandbox/reconciler/webhooks/certs"
)

// serveValidator installs the webhook configuration pointed at a validator
// served by this process, and stops both when the test ends.
func serveValidator(t *testing.T, v *webhooks.Validator) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	addr, err := tests.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	_, portStr, _ := net.SplitHostPort(addr)
	port, _ := strconv.Atoi(portStr)
	remove, err := cluster.InstallLocalWebhook(ctx, env.Client, "agent-sandbox-system", port)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = remove() })
	cm := &certs.Certs{Client: env.Client, Namespace: "agent-sandbox-system", CertDir: t.TempDir()}
	if _, err := cm.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	srv := webhook.NewServer(webhook.Options{Port: port, Host: "127.0.0.1", CertDir: cm.CertDir})
	srv.Register(webhooks.ValidatePath, &webhook.Admission{Handler: v})
	served := make(chan error, 1)
	go func() { served <- srv.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil && !errors.Is(err, context.Canceled) {
			t.Logf("webhook server: %v", err)
		}
	})
	deadline := time.Now().Add(10 * time.Second)
	for srv.StartedChecker()(&http.Request{}) != nil {
		if time.Now().After(deadline) {
			t.Fatal("webhook server did not start")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// actingAs is a client whose requests the API server attributes to user.
// It may do anything (system:masters): only the name differs, so every
// refusal below is the webhook's, not RBAC's.
func actingAs(t *testing.T, user string) client.Client {
	t.Helper()
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:masters"}}
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestWebhookOwnershipCannotBeForged drives the real API server: a user
// may not make a Sandbox a warm pool's member, hand a Sandbox to a claim,
// or make a claim controlled by another claim, however much RBAC they
// have; the controller's own ServiceAccount may. Re-applying an object with
// the reference it already has, and dropping the reference, are anyone's.
func TestWebhookOwnershipCannotBeForged(t *testing.T) {
	const controllerSA = "system:serviceaccount:agent-sandbox-system:agent-sandbox-controller"
	set, err := policy.LoadConfig(policy.Config{Bundles: policy.DefaultBundles})
	if err != nil {
		t.Fatal(err)
	}
	holder := &policy.Holder{}
	holder.Set(set)
	serveValidator(t, &webhooks.Validator{Policy: holder, Reader: env.Client, ControllerUser: webhooks.ServiceAccountUser("agent-sandbox-system", "agent-sandbox-controller")})

	ctx := context.Background()
	ns := env.Namespace(t)
	alice, ctl := actingAs(t, "alice"), actingAs(t, controllerSA)
	pool := &extv1beta1.SandboxWarmPool{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pool"},
		Spec:       extv1beta1.SandboxWarmPoolSpec{Replicas: ptr.To[int32](0), TemplateRef: extv1beta1.SandboxTemplateRef{Name: "tpl"}},
	}
	claim := &extv1beta1.SandboxClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "claim"},
		Spec:       extv1beta1.SandboxClaimSpec{WarmPoolRef: extv1beta1.SandboxWarmPoolRef{Name: "pool"}},
	}
	for _, o := range []client.Object{pool, claim} {
		if err := alice.Create(ctx, o); err != nil {
			t.Fatalf("creating %s: %v", o.GetName(), err)
		}
	}
	ref := func(o client.Object, kind string) metav1.OwnerReference {
		return metav1.OwnerReference{APIVersion: extv1beta1.GroupVersion.String(), Kind: kind, Name: o.GetName(), UID: o.GetUID(),
			Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}
	}
	member := func(name string, owners ...metav1.OwnerReference) *sandboxv1beta1.Sandbox {
		sb := &sandboxv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, OwnerReferences: owners}}
		sb.Spec.PodTemplate.Spec = corev1.PodSpec{RuntimeClassName: ptr.To("gvisor"), Containers: []corev1.Container{{Name: "agent", Image: "agent:1"}}}
		return sb
	}
	refused := func(what string, err error) {
		t.Helper()
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "only the agent-sandbox controller ("+controllerSA+")") ||
			!strings.Contains(err.Error(), `"alice"`) {
			t.Errorf("%s: want the webhook's refusal, got %v", what, err)
		}
	}
	setOwners := func(c client.Client, key types.NamespacedName, owners ...metav1.OwnerReference) error {
		sb := &sandboxv1beta1.Sandbox{}
		if err := env.Client.Get(ctx, key, sb); err != nil {
			return err
		}
		sb.OwnerReferences = owners
		return c.Update(ctx, sb)
	}

	// Creating a pool member.
	refused("alice creates a pool member", alice.Create(ctx, member("forged", ref(pool, "SandboxWarmPool"))))
	if err := ctl.Create(ctx, member("real", ref(pool, "SandboxWarmPool"))); err != nil {
		t.Fatalf("the controller creates a pool member: %v", err)
	}
	key := types.NamespacedName{Namespace: ns, Name: "real"}

	// A GitOps tool re-applies the member as it is, with a new label.
	sb := &sandboxv1beta1.Sandbox{}
	if err := env.Client.Get(ctx, key, sb); err != nil {
		t.Fatal(err)
	}
	sb.Labels = map[string]string{"reapplied": "yes"}
	if err := alice.Update(ctx, sb); err != nil {
		t.Errorf("an update keeping the controller reference was refused: %v", err)
	}

	// Handing the member to a claim is the controller's job.
	refused("alice hands a member to a claim", setOwners(alice, key, ref(claim, "SandboxClaim")))
	if err := setOwners(ctl, key, ref(claim, "SandboxClaim")); err != nil {
		t.Errorf("the controller hands a member to a claim: %v", err)
	}

	// Adding a controller reference to one's own Sandbox.
	if err := alice.Create(ctx, member("mine")); err != nil {
		t.Fatal(err)
	}
	refused("alice adds a claim to her Sandbox", setOwners(alice, types.NamespacedName{Namespace: ns, Name: "mine"}, ref(claim, "SandboxClaim")))

	// A claim controlled by another claim.
	sub := &extv1beta1.SandboxClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "sub", OwnerReferences: []metav1.OwnerReference{ref(claim, "SandboxClaim")}},
		Spec:       extv1beta1.SandboxClaimSpec{WarmPoolRef: extv1beta1.SandboxWarmPoolRef{Name: "pool"}},
	}
	refused("alice creates a claim owned by a claim", alice.Create(ctx, sub))

	// Dropping the reference takes nothing from anyone.
	if err := setOwners(alice, key); err != nil {
		t.Errorf("removing the controller reference was refused: %v", err)
	}
	if err := env.Client.Get(ctx, key, sb); err != nil || len(sb.OwnerReferences) != 0 {
		t.Errorf("owners after removal: %v (%v)", sb.OwnerReferences, err)
	}
	// Nothing alice was refused exists.
	for _, name := range []string{"forged", "sub"} {
		err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &sandboxv1beta1.Sandbox{})
		if name == "sub" {
			err = env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &extv1beta1.SandboxClaim{})
		}
		if !apierrors.IsNotFound(err) {
			t.Errorf("%s: %v", name, fmt.Errorf("exists after the refusal (err %w)", err))
		}
	}
}

// TestWebhookGuardsOwnerKindsInEveryGroup drives the real API server: a
// Sandbox whose controller reference names a SandboxWarmPool or a
// SandboxClaim under another API group, carrying the real pool's or
// claim's name and UID, is refused as a forged member would be: the kind is
// guarded whatever the group. The controller's own ServiceAccount is not
// refused, and a reference to another kind of another group still passes.
func TestWebhookGuardsOwnerKindsInEveryGroup(t *testing.T) {
	const controllerSA = "system:serviceaccount:agent-sandbox-system:agent-sandbox-controller"
	serveValidator(t, &webhooks.Validator{Policy: &policy.Holder{}, Reader: env.Client,
		ControllerUser: webhooks.ServiceAccountUser("agent-sandbox-system", "agent-sandbox-controller")})

	ctx := context.Background()
	ns := env.Namespace(t)
	alice, ctl := actingAs(t, "alice"), actingAs(t, controllerSA)
	pool := &extv1beta1.SandboxWarmPool{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pool"},
		Spec:       extv1beta1.SandboxWarmPoolSpec{Replicas: ptr.To[int32](0), TemplateRef: extv1beta1.SandboxTemplateRef{Name: "tpl"}},
	}
	claim := &extv1beta1.SandboxClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "claim"},
		Spec:       extv1beta1.SandboxClaimSpec{WarmPoolRef: extv1beta1.SandboxWarmPoolRef{Name: "pool"}},
	}
	for _, o := range []client.Object{pool, claim} {
		if err := alice.Create(ctx, o); err != nil {
			t.Fatalf("creating %s: %v", o.GetName(), err)
		}
	}
	lookalike := func(apiVersion, kind string, o client.Object) metav1.OwnerReference {
		return metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: o.GetName(), UID: o.GetUID(), Controller: ptr.To(true)}
	}
	sandbox := func(name string, owner metav1.OwnerReference) *sandboxv1beta1.Sandbox {
		sb := &sandboxv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, OwnerReferences: []metav1.OwnerReference{owner}}}
		sb.Spec.PodTemplate.Spec = corev1.PodSpec{RuntimeClassName: ptr.To("gvisor"), Containers: []corev1.Container{{Name: "agent", Image: "agent:1"}}}
		return sb
	}
	cases := []struct {
		name  string
		owner metav1.OwnerReference
	}{
		{"evil-pool", lookalike("evil.example.com/v1", "SandboxWarmPool", pool)},
		{"evil-claim", lookalike("evil.example.com/v1", "SandboxClaim", claim)},
		{"core-group-pool", lookalike("v1", "SandboxWarmPool", pool)},
		{"sandbox-group-claim", lookalike(sandboxv1beta1.GroupVersion.String(), "SandboxClaim", claim)},
	}
	for _, tc := range cases {
		err := alice.Create(ctx, sandbox(tc.name, tc.owner))
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "only the agent-sandbox controller ("+controllerSA+")") ||
			!strings.Contains(err.Error(), tc.owner.APIVersion) {
			t.Errorf("%s: want the webhook's refusal naming %s, got %v", tc.name, tc.owner.APIVersion, err)
		}
		if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: tc.name}, &sandboxv1beta1.Sandbox{}); !apierrors.IsNotFound(err) {
			t.Errorf("%s exists after the refusal (err %v)", tc.name, err)
		}
	}
	if err := ctl.Create(ctx, sandbox("by-the-controller", lookalike("evil.example.com/v1", "SandboxWarmPool", pool))); err != nil {
		t.Errorf("the controller's own request was refused: %v", err)
	}
	other := metav1.OwnerReference{APIVersion: "evil.example.com/v1", Kind: "Workflow", Name: "wf", UID: "wf-uid", Controller: ptr.To(true)}
	if err := alice.Create(ctx, sandbox("workflow", other)); err != nil {
		t.Errorf("a controller reference of another kind was refused: %v", err)
	}
}
