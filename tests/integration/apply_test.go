package integration

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	extac "github.com/agentsandbox/reconciler/api/extensions/v1beta1/applyconfiguration/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	sandboxac "github.com/agentsandbox/reconciler/api/v1beta1/applyconfiguration/api/v1beta1"
)

const testManager = "integration-test"

// namedApplyConfiguration is what the generated root apply configurations offer.
type namedApplyConfiguration interface {
	runtime.ApplyConfiguration
	GetName() *string
	GetNamespace() *string
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func podTemplate() *sandboxac.PodTemplateApplyConfiguration {
	return sandboxac.PodTemplate().
		WithObjectMeta(sandboxac.PodMetadata().WithLabels(map[string]string{"app": "demo"})).
		WithSpec(corev1ac.PodSpec().WithContainers(
			corev1ac.Container().WithName("main").WithImage("registry.k8s.io/pause:3.10").
				WithPorts(corev1ac.ContainerPort().WithContainerPort(8080)),
		))
}

// applyAndCheck applies the configuration mk builds with server-side apply,
// reads the object back into obj, and checks that (1) what our field manager
// owns, extracted with the generated Extract function, equals what we
// applied, and (2) applying the same configuration again changes nothing
// (same resourceVersion). mk is called for every apply because the client
// writes the server's response back into the configuration it is given.
func applyAndCheck[AC any](t *testing.T, mk func() namedApplyConfiguration, obj client.Object, extract func() (AC, error)) {
	t.Helper()
	ctx := ctxFor(t)
	ac := mk()
	applied := toMap(t, ac)
	if err := env.Client.Apply(ctx, ac, client.FieldOwner(testManager), client.ForceOwnership); err != nil {
		t.Fatalf("apply: %v", err)
	}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: *ac.GetNamespace(), Name: *ac.GetName()}, obj); err != nil {
		t.Fatalf("get: %v", err)
	}
	got, err := extract()
	if err != nil {
		t.Fatalf("extract: %v", err)
	}
	if diff := cmp.Diff(applied, toMap(t, got)); diff != "" {
		t.Errorf("extracted apply configuration differs from the applied one (-applied +extracted):\n%s", diff)
	}
	rv := obj.GetResourceVersion()
	if err := env.Client.Apply(ctx, mk(), client.FieldOwner(testManager), client.ForceOwnership); err != nil {
		t.Fatalf("second apply: %v", err)
	}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
		t.Fatalf("get: %v", err)
	}
	if obj.GetResourceVersion() != rv {
		t.Errorf("re-applying the same configuration changed the object: resourceVersion %s -> %s", rv, obj.GetResourceVersion())
	}
}

func toMap(t *testing.T, v any) map[string]any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestApplyRoundTripAndDefaults(t *testing.T) {
	t.Run("Sandbox", func(t *testing.T) {
		ns := env.Namespace(t)
		mk := func() namedApplyConfiguration {
			return sandboxac.Sandbox("box", ns).WithSpec(sandboxac.SandboxSpec().
				WithPodTemplate(podTemplate()).
				WithService(true).
				WithVolumeClaimTemplates(sandboxac.PersistentVolumeClaimTemplate().
					WithName("data").
					WithSpec(corev1ac.PersistentVolumeClaimSpec().
						WithAccessModes("ReadWriteOnce").
						WithResources(corev1ac.VolumeResourceRequirements().WithRequests(resourceList("1Gi"))))))
		}
		var sb sandboxv1beta1.Sandbox
		applyAndCheck(t, mk, &sb, func() (*sandboxac.SandboxApplyConfiguration, error) {
			return sandboxac.ExtractSandbox(&sb, testManager)
		})
		if sb.Spec.OperatingMode != sandboxv1beta1.SandboxOperatingModeRunning {
			t.Errorf("operatingMode default = %q, want Running", sb.Spec.OperatingMode)
		}
		if sb.Spec.ShutdownPolicy == nil || *sb.Spec.ShutdownPolicy != sandboxv1beta1.ShutdownPolicyRetain {
			t.Errorf("shutdownPolicy default = %v, want Retain", sb.Spec.ShutdownPolicy)
		}
	})

	t.Run("SandboxTemplate", func(t *testing.T) {
		ns := env.Namespace(t)
		mk := func() namedApplyConfiguration {
			return extac.SandboxTemplate("tpl", ns).WithSpec(extac.SandboxTemplateSpec().WithPodTemplate(podTemplate()))
		}
		var tpl extv1beta1.SandboxTemplate
		applyAndCheck(t, mk, &tpl, func() (*extac.SandboxTemplateApplyConfiguration, error) {
			return extac.ExtractSandboxTemplate(&tpl, testManager)
		})
		if got := tpl.Spec.NetworkPolicyManagement; got != extv1beta1.NetworkPolicyManagementManaged {
			t.Errorf("networkPolicyManagement default = %q, want Managed", got)
		}
		if got := tpl.Spec.EnvVarsInjectionPolicy; got != extv1beta1.InjectionPolicyDisallowed {
			t.Errorf("envVarsInjectionPolicy default = %q, want Disallowed", got)
		}
		if got := tpl.Spec.VolumeClaimTemplatesPolicy; got != extv1beta1.InjectionPolicyDisallowed {
			t.Errorf("volumeClaimTemplatesPolicy default = %q, want Disallowed", got)
		}
	})

	t.Run("SandboxWarmPool", func(t *testing.T) {
		ns := env.Namespace(t)
		mk := func() namedApplyConfiguration {
			return extac.SandboxWarmPool("pool", ns).WithSpec(extac.SandboxWarmPoolSpec().
				WithTemplateRef(extac.SandboxTemplateRef().WithName("tpl")))
		}
		var pool extv1beta1.SandboxWarmPool
		applyAndCheck(t, mk, &pool, func() (*extac.SandboxWarmPoolApplyConfiguration, error) {
			return extac.ExtractSandboxWarmPool(&pool, testManager)
		})
		if pool.Spec.Replicas == nil || *pool.Spec.Replicas != 1 {
			t.Errorf("replicas default = %v, want 1", pool.Spec.Replicas)
		}
		if pool.Spec.UpdateStrategy == nil || pool.Spec.UpdateStrategy.Type != extv1beta1.UpdateStrategyOnReplenish {
			t.Errorf("updateStrategy default = %+v, want type OnReplenish", pool.Spec.UpdateStrategy)
		}
	})

	t.Run("SandboxClaim", func(t *testing.T) {
		ns := env.Namespace(t)
		mk := func() namedApplyConfiguration {
			return extac.SandboxClaim("claim", ns).WithSpec(extac.SandboxClaimSpec().
				WithWarmPoolRef(extac.SandboxWarmPoolRef().WithName("pool")).
				WithLifecycle(extac.Lifecycle().WithTTLSecondsAfterFinished(60)).
				WithEnv(extac.EnvVar().WithName("MODE").WithValue("test")))
		}
		var claim extv1beta1.SandboxClaim
		applyAndCheck(t, mk, &claim, func() (*extac.SandboxClaimApplyConfiguration, error) {
			return extac.ExtractSandboxClaim(&claim, testManager)
		})
		if claim.Spec.Lifecycle == nil || claim.Spec.Lifecycle.ShutdownPolicy != extv1beta1.ShutdownPolicyRetain {
			t.Errorf("lifecycle.shutdownPolicy default = %+v, want Retain", claim.Spec.Lifecycle)
		}
	})
}

// TestStatusApply checks that status is its own subresource, written with a
// separate field manager, and extracted separately from the spec.
func TestStatusApply(t *testing.T) {
	ns := env.Namespace(t)
	ctx := ctxFor(t)
	if err := env.Client.Apply(ctx, sandboxac.Sandbox("box", ns).WithSpec(sandboxac.SandboxSpec().WithPodTemplate(podTemplate())),
		client.FieldOwner(testManager)); err != nil {
		t.Fatal(err)
	}
	status := sandboxac.Sandbox("box", ns).WithStatus(sandboxac.SandboxStatus().
		WithService("box").WithServiceFQDN("box." + ns + ".svc.cluster.local").WithPodIPs("10.0.0.7"))
	applied := toMap(t, status)
	if err := env.Client.Status().Apply(ctx, status, client.FieldOwner(testManager+"-status"), client.ForceOwnership); err != nil {
		t.Fatalf("status apply: %v", err)
	}
	var sb sandboxv1beta1.Sandbox
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "box"}, &sb); err != nil {
		t.Fatal(err)
	}
	if sb.Status.Service != "box" || len(sb.Status.PodIPs) != 1 || sb.Generation != 1 {
		t.Errorf("status = %+v, generation %d; want service and podIPs set, generation unchanged (1)", sb.Status, sb.Generation)
	}
	got, err := sandboxac.ExtractSandboxStatus(&sb, testManager+"-status")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(applied, toMap(t, got)); diff != "" {
		t.Errorf("extracted status differs (-applied +extracted):\n%s", diff)
	}
	spec, err := sandboxac.ExtractSandbox(&sb, testManager+"-status")
	if err != nil {
		t.Fatal(err)
	}
	if spec.Spec != nil {
		t.Errorf("the status manager owns spec fields: %+v", spec.Spec)
	}
}

func resourceList(storage string) corev1.ResourceList {
	return corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(storage)}
}
