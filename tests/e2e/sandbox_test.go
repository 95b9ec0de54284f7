package e2e

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	"github.com/agentsandbox/reconciler/tests"
	"github.com/agentsandbox/reconciler/tests/envtest"
)

const storageClass = "e2e-manual"

func newClient(t *testing.T) client.Client {
	t.Helper()
	c, err := client.New(local.Config, client.Options{Scheme: envtest.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func namespace(t *testing.T, c client.Client) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: envtest.NamespacePrefix(t.Name())}}
	if err := c.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), ns) })
	return ns.Name
}

// persistentVolume pre-creates a PV the PV controller can bind statically:
// the local cluster has no provisioner.
func persistentVolume(t *testing.T, c client.Client, name string) {
	t.Helper()
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeSpec{
			StorageClassName:              storageClass,
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/tmp/" + name}},
		},
	}
	if err := c.Create(context.Background(), pv); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), pv) })
}

// The suites' shared object builders and wait.
var (
	sandbox = tests.Sandbox
	waitFor = tests.WaitFor
)

func withHome(sb *sandboxv1beta1.Sandbox) {
	sc := storageClass
	sb.Spec.VolumeClaimTemplates = []sandboxv1beta1.PersistentVolumeClaimTemplate{{
		EmbeddedObjectMetadata: sandboxv1beta1.EmbeddedObjectMetadata{Name: "home"},
		Spec: corev1.PersistentVolumeClaimSpec{
			StorageClassName: &sc,
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}}
	sb.Spec.PodTemplate.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "home", MountPath: "/home/agent"}}
}

// setMode changes operatingMode, retrying when the controller wrote status
// in between.
func setMode(t *testing.T, c client.Client, key types.NamespacedName, m sandboxv1beta1.SandboxOperatingMode) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		sb := &sandboxv1beta1.Sandbox{}
		if err := c.Get(context.Background(), key, sb); err != nil {
			return err
		}
		sb.Spec.OperatingMode = m
		return c.Update(context.Background(), sb)
	})
	if err != nil {
		t.Fatalf("setting operatingMode %s: %v", m, err)
	}
}

func readyIs(c client.Client, key types.NamespacedName, status metav1.ConditionStatus, reason string) func() error {
	return func() error {
		sb := &sandboxv1beta1.Sandbox{}
		if err := c.Get(context.Background(), key, sb); err != nil {
			return err
		}
		for _, cond := range sb.Status.Conditions {
			if cond.Type == sandboxv1beta1.ConditionReady {
				if cond.Status == status && cond.Reason == reason {
					return nil
				}
				return fmt.Errorf("Ready=%s/%s: %s", cond.Status, cond.Reason, cond.Message)
			}
		}
		return errors.New("no Ready condition")
	}
}

func gone(c client.Client, key types.NamespacedName, o client.Object) func() error {
	return func() error {
		err := c.Get(context.Background(), key, o)
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("%T %s still exists (err %w)", o, key.Name, err)
	}
}

// TestSandboxLifecycle: Ready with a pod IP and FQDN; suspend keeps the PVC;
// resume is Ready again on the same PVC; deleting the Sandbox lets garbage
// collection remove the Pod, Service and PVC.
func TestSandboxLifecycle(t *testing.T) {
	c := newClient(t)
	ns := namespace(t, c)
	persistentVolume(t, c, "pv-"+ns)
	ctx := context.Background()
	key := types.NamespacedName{Namespace: ns, Name: "workbench"}
	if err := c.Create(ctx, sandbox(ns, "workbench", withHome)); err != nil {
		t.Fatal(err)
	}
	took := waitFor(t, 90*time.Second, "Ready", readyIs(c, key, metav1.ConditionTrue, sandboxv1beta1.ReasonDependenciesReady))
	t.Logf("Ready after %s (includes static PV binding)", took.Round(time.Millisecond))

	sb := &sandboxv1beta1.Sandbox{}
	_ = c.Get(ctx, key, sb)
	if len(sb.Status.PodIPs) == 0 || sb.Status.ServiceFQDN != "workbench."+ns+".svc.cluster.local" || sb.Status.NodeName == "" {
		t.Errorf("status = %+v, want pod IPs, node and FQDN", sb.Status)
	}
	pvc := &corev1.PersistentVolumeClaim{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "home-workbench"}, pvc); err != nil || pvc.Status.Phase != corev1.ClaimBound {
		t.Fatalf("pvc: %v (phase %s)", err, pvc.Status.Phase)
	}

	setMode(t, c, key, sandboxv1beta1.SandboxOperatingModeSuspended)
	took = waitFor(t, 60*time.Second, "suspended", func() error {
		if err := gone(c, key, &corev1.Pod{})(); err != nil {
			return err
		}
		s := &sandboxv1beta1.Sandbox{}
		_ = c.Get(ctx, key, s)
		for _, cond := range s.Status.Conditions {
			if cond.Type == sandboxv1beta1.ConditionSuspended && cond.Status == metav1.ConditionTrue && cond.Reason == sandboxv1beta1.ReasonPodTerminated {
				return nil
			}
		}
		return fmt.Errorf("conditions %+v", s.Status.Conditions)
	})
	t.Logf("suspended after %s", took.Round(time.Millisecond))
	kept := &corev1.PersistentVolumeClaim{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "home-workbench"}, kept); err != nil || kept.UID != pvc.UID {
		t.Fatalf("pvc after suspend: %v", err)
	}
	if err := c.Get(ctx, key, &corev1.Service{}); err != nil {
		t.Fatalf("service after suspend: %v", err)
	}

	setMode(t, c, key, sandboxv1beta1.SandboxOperatingModeRunning)
	took = waitFor(t, 60*time.Second, "Ready after resume", readyIs(c, key, metav1.ConditionTrue, sandboxv1beta1.ReasonDependenciesReady))
	t.Logf("Ready again after resume in %s", took.Round(time.Millisecond))
	pod := &corev1.Pod{}
	if err := c.Get(ctx, key, pod); err != nil {
		t.Fatal(err)
	}
	claim := ""
	for _, v := range pod.Spec.Volumes {
		if v.PersistentVolumeClaim != nil {
			claim = v.PersistentVolumeClaim.ClaimName
		}
	}
	if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: claim}, kept); err != nil || kept.UID != pvc.UID {
		t.Fatalf("resumed pod uses claim %q, want the same PVC %s (%v)", claim, pvc.Name, err)
	}

	if err := c.Delete(ctx, sb); err != nil {
		t.Fatal(err)
	}
	took = waitFor(t, 90*time.Second, "garbage collection", func() error {
		return errors.Join(gone(c, key, &corev1.Pod{})(), gone(c, key, &corev1.Service{})(),
			gone(c, types.NamespacedName{Namespace: ns, Name: "home-workbench"}, &corev1.PersistentVolumeClaim{})(),
			gone(c, key, &sandboxv1beta1.Sandbox{})())
	})
	t.Logf("sandbox and children collected in %s", took.Round(time.Millisecond))
}

func TestSandboxExpiry(t *testing.T) {
	c := newClient(t)
	ns := namespace(t, c)
	ctx := context.Background()
	// The API stores times at second precision.
	at := metav1.NewTime(time.Now().Add(4 * time.Second).Truncate(time.Second))
	retain := sandbox(ns, "retained", func(sb *sandboxv1beta1.Sandbox) { sb.Spec.ShutdownTime = &at })
	del := sandbox(ns, "deleted", func(sb *sandboxv1beta1.Sandbox) {
		sb.Spec.ShutdownTime = &at
		sb.Spec.ShutdownPolicy = ptr.To(sandboxv1beta1.ShutdownPolicyDelete)
	})
	for _, sb := range []*sandboxv1beta1.Sandbox{retain, del} {
		if err := c.Create(ctx, sb); err != nil {
			t.Fatal(err)
		}
	}
	rkey := types.NamespacedName{Namespace: ns, Name: "retained"}
	dkey := types.NamespacedName{Namespace: ns, Name: "deleted"}
	waitFor(t, 30*time.Second, "Ready before expiry", readyIs(c, rkey, metav1.ConditionTrue, sandboxv1beta1.ReasonDependenciesReady))

	waitFor(t, 30*time.Second, "Retain expired", func() error {
		return errors.Join(readyIs(c, rkey, metav1.ConditionFalse, sandboxv1beta1.ReasonSandboxExpired)(),
			gone(c, rkey, &corev1.Pod{})(), gone(c, rkey, &corev1.Service{})())
	})
	if late := time.Since(at.Time); late < 0 {
		t.Errorf("expired %s before shutdownTime", -late)
	}
	waitFor(t, 30*time.Second, "Delete expired and collected", func() error {
		return errors.Join(gone(c, dkey, &sandboxv1beta1.Sandbox{})(), gone(c, dkey, &corev1.Pod{})(), gone(c, dkey, &corev1.Service{})())
	})
	sb := &sandboxv1beta1.Sandbox{}
	if err := c.Get(ctx, rkey, sb); err != nil {
		t.Fatalf("Retain sandbox: %v", err)
	}
	if sb.Status.ServiceFQDN != "" || len(sb.Status.PodIPs) != 0 {
		t.Errorf("Retain status not cleared: %+v", sb.Status)
	}
}
