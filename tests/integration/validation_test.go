package integration

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
)

func sandbox(ns, name string) *sandboxv1beta1.Sandbox {
	return &sandboxv1beta1.Sandbox{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: sandboxv1beta1.SandboxSpec{SandboxBlueprint: sandboxv1beta1.SandboxBlueprint{
			PodTemplate: sandboxv1beta1.PodTemplate{Spec: corev1.PodSpec{
				Containers: []corev1.Container{{Name: "main", Image: "registry.k8s.io/pause:3.10"}},
			}},
		}},
	}
}

func vct(name, size string) sandboxv1beta1.PersistentVolumeClaimTemplate {
	return sandboxv1beta1.PersistentVolumeClaimTemplate{
		EmbeddedObjectMetadata: sandboxv1beta1.EmbeddedObjectMetadata{Name: name},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: resourceList(size)},
		},
	}
}

// wantInvalid checks that err is the API server's Invalid error and that its
// message (what kubectl prints) contains every fragment.
func wantInvalid(t *testing.T, err error, fragments ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("the API server accepted the change; want it rejected with %q", fragments)
	}
	if !apierrors.IsInvalid(err) {
		t.Fatalf("error = %v (reason %q); want Invalid", err, apierrors.ReasonForError(err))
	}
	for _, f := range fragments {
		if !strings.Contains(err.Error(), f) {
			t.Errorf("error message %q does not contain %q", err.Error(), f)
		}
	}
}

const vctMessage = "volumeClaimTemplates is immutable"

func TestSandboxVolumeClaimTemplatesImmutable(t *testing.T) {
	tests := []struct {
		name      string
		before    []sandboxv1beta1.PersistentVolumeClaimTemplate
		after     []sandboxv1beta1.PersistentVolumeClaimTemplate
		wantError bool
	}{
		{"changed size", []sandboxv1beta1.PersistentVolumeClaimTemplate{vct("data", "1Gi")}, []sandboxv1beta1.PersistentVolumeClaimTemplate{vct("data", "2Gi")}, true},
		{"entry added", []sandboxv1beta1.PersistentVolumeClaimTemplate{vct("data", "1Gi")}, []sandboxv1beta1.PersistentVolumeClaimTemplate{vct("data", "1Gi"), vct("cache", "1Gi")}, true},
		{"unset to set", nil, []sandboxv1beta1.PersistentVolumeClaimTemplate{vct("data", "1Gi")}, true},
		{"set to unset", []sandboxv1beta1.PersistentVolumeClaimTemplate{vct("data", "1Gi")}, nil, true},
		{"unchanged", []sandboxv1beta1.PersistentVolumeClaimTemplate{vct("data", "1Gi")}, []sandboxv1beta1.PersistentVolumeClaimTemplate{vct("data", "1Gi")}, false},
		{"unset stays unset", nil, nil, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := ctxFor(t)
			sb := sandbox(env.Namespace(t), "box")
			sb.Spec.VolumeClaimTemplates = tc.before
			if err := env.Client.Create(ctx, sb); err != nil {
				t.Fatalf("create: %v", err)
			}
			// Another field changes too, so the update is never a no-op.
			sb.Spec.VolumeClaimTemplates = tc.after
			sb.Spec.OperatingMode = sandboxv1beta1.SandboxOperatingModeSuspended
			err := env.Client.Update(ctx, sb)
			if tc.wantError {
				wantInvalid(t, err, "spec.volumeClaimTemplates", vctMessage, "create a new Sandbox")
			} else if err != nil {
				t.Fatalf("update: %v", err)
			}
		})
	}
}

func TestClaimWarmPoolRefImmutable(t *testing.T) {
	ctx := ctxFor(t)
	claim := &extv1beta1.SandboxClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: env.Namespace(t), Name: "claim"},
		Spec:       extv1beta1.SandboxClaimSpec{WarmPoolRef: extv1beta1.SandboxWarmPoolRef{Name: "pool-a"}},
	}
	if err := env.Client.Create(ctx, claim); err != nil {
		t.Fatal(err)
	}
	claim.Spec.AdditionalPodMetadata.Labels = map[string]string{"team": "a"}
	if err := env.Client.Update(ctx, claim); err != nil {
		t.Fatalf("changing another field: %v", err)
	}
	claim.Spec.WarmPoolRef.Name = "pool-b"
	wantInvalid(t, env.Client.Update(ctx, claim), "spec.warmPoolRef",
		"spec.warmPoolRef cannot be changed after the claim is created", "restore the previous pool name")
}

func TestWarmPoolTemplateRefRequired(t *testing.T) {
	ctx := ctxFor(t)
	pool := &extv1beta1.SandboxWarmPool{
		ObjectMeta: metav1.ObjectMeta{Namespace: env.Namespace(t), Name: "pool"},
		Spec:       extv1beta1.SandboxWarmPoolSpec{TemplateRef: extv1beta1.SandboxTemplateRef{Name: ""}},
	}
	wantInvalid(t, env.Client.Create(ctx, pool), "spec.sandboxTemplateRef",
		"spec.sandboxTemplateRef.name is empty: set it to the name of a SandboxTemplate in this namespace")

	pool.Spec.TemplateRef.Name = "tpl"
	if err := env.Client.Create(ctx, pool); err != nil {
		t.Fatalf("create with a template name: %v", err)
	}
}

func TestClaimEnvNamesUnique(t *testing.T) {
	tests := []struct {
		name      string
		env       []extv1beta1.EnvVar
		wantError bool
	}{
		{"duplicate in first container", []extv1beta1.EnvVar{{Name: "A", Value: "1"}, {Name: "A", Value: "2"}}, true},
		{"duplicate in named container", []extv1beta1.EnvVar{{Name: "A", Value: "1", ContainerName: "x"}, {Name: "B", Value: "1"}, {Name: "A", Value: "2", ContainerName: "x"}}, true},
		{"same name in two containers", []extv1beta1.EnvVar{{Name: "A", Value: "1", ContainerName: "x"}, {Name: "A", Value: "2", ContainerName: "y"}}, false},
		{"distinct names", []extv1beta1.EnvVar{{Name: "A", Value: "1"}, {Name: "B", Value: "2"}}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			claim := &extv1beta1.SandboxClaim{
				ObjectMeta: metav1.ObjectMeta{Namespace: env.Namespace(t), Name: "claim"},
				Spec: extv1beta1.SandboxClaimSpec{
					WarmPoolRef: extv1beta1.SandboxWarmPoolRef{Name: "pool"},
					Env:         tc.env,
				},
			}
			err := env.Client.Create(ctxFor(t), claim)
			if tc.wantError {
				wantInvalid(t, err, "spec.env", "sets the same variable more than once for one container", "keep a single entry per name and containerName")
			} else if err != nil {
				t.Fatalf("create: %v", err)
			}
		})
	}
}

func TestEnums(t *testing.T) {
	t.Run("operatingMode", func(t *testing.T) {
		sb := sandbox(env.Namespace(t), "box")
		sb.Spec.OperatingMode = "Paused"
		wantInvalid(t, env.Client.Create(ctxFor(t), sb), "spec.operatingMode", `Unsupported value: "Paused"`, `"Running"`, `"Suspended"`)
	})
	t.Run("sandbox shutdownPolicy", func(t *testing.T) {
		sb := sandbox(env.Namespace(t), "box")
		p := sandboxv1beta1.ShutdownPolicy("DeleteForeground") // valid for claims only
		sb.Spec.ShutdownPolicy = &p
		wantInvalid(t, env.Client.Create(ctxFor(t), sb), "spec.shutdownPolicy", `Unsupported value: "DeleteForeground"`, `"Delete"`, `"Retain"`)
	})
	t.Run("claim shutdownPolicy", func(t *testing.T) {
		claim := &extv1beta1.SandboxClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: env.Namespace(t), Name: "claim"},
			Spec: extv1beta1.SandboxClaimSpec{
				WarmPoolRef: extv1beta1.SandboxWarmPoolRef{Name: "pool"},
				Lifecycle:   &extv1beta1.Lifecycle{ShutdownPolicy: "Never"},
			},
		}
		wantInvalid(t, env.Client.Create(ctxFor(t), claim), "spec.lifecycle.shutdownPolicy", `Unsupported value: "Never"`, `"DeleteForeground"`)
	})
	t.Run("warm pool replicas", func(t *testing.T) {
		n := int32(-1)
		pool := &extv1beta1.SandboxWarmPool{
			ObjectMeta: metav1.ObjectMeta{Namespace: env.Namespace(t), Name: "pool"},
			Spec:       extv1beta1.SandboxWarmPoolSpec{Replicas: &n, TemplateRef: extv1beta1.SandboxTemplateRef{Name: "tpl"}},
		}
		wantInvalid(t, env.Client.Create(ctxFor(t), pool), "spec.replicas", "should be greater than or equal to 0")
	})
}

var _ client.Object = &extv1beta1.SandboxClaim{}
