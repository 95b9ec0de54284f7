package sandbox

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/agentsandbox/reconciler/tests/envtest"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	"github.com/agentsandbox/reconciler/render"
)

const timeout = 20 * time.Second

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func newSandbox(ns, name string, mutate ...func(*sandboxv1beta1.Sandbox)) *sandboxv1beta1.Sandbox {
	sb := &sandboxv1beta1.Sandbox{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: sandboxv1beta1.SandboxSpec{SandboxBlueprint: sandboxv1beta1.SandboxBlueprint{
			PodTemplate: sandboxv1beta1.PodTemplate{
				ObjectMeta: sandboxv1beta1.PodMetadata{Labels: map[string]string{"app": "demo"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "main", Image: "demo:1", Ports: []corev1.ContainerPort{{ContainerPort: 8080}},
				}}},
			},
		}},
	}
	for _, m := range mutate {
		m(sb)
	}
	return sb
}

func withService(v bool) func(*sandboxv1beta1.Sandbox) {
	return func(sb *sandboxv1beta1.Sandbox) { sb.Spec.Service = &v }
}

func withVolume(name string) func(*sandboxv1beta1.Sandbox) {
	return func(sb *sandboxv1beta1.Sandbox) {
		sb.Spec.VolumeClaimTemplates = append(sb.Spec.VolumeClaimTemplates, sandboxv1beta1.PersistentVolumeClaimTemplate{
			EmbeddedObjectMetadata: sandboxv1beta1.EmbeddedObjectMetadata{Name: name},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
			},
		})
	}
}

// update changes a Sandbox the way a careful user does: read, mutate, write,
// and retry when the controller wrote status in between.
func update(t *testing.T, ns, name string, mutate func(*sandboxv1beta1.Sandbox)) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		sb := &sandboxv1beta1.Sandbox{}
		if err := env.Client.Get(ctxFor(t), types.NamespacedName{Namespace: ns, Name: name}, sb); err != nil {
			return err
		}
		mutate(sb)
		return env.Client.Update(ctxFor(t), sb)
	})
	if err != nil {
		t.Fatalf("updating sandbox %s: %v", name, err)
	}
}

func create(t *testing.T, sb *sandboxv1beta1.Sandbox) *sandboxv1beta1.Sandbox {
	t.Helper()
	if err := env.Client.Create(ctxFor(t), sb); err != nil {
		t.Fatalf("creating sandbox: %v", err)
	}
	return sb
}

// eventually retries check until it returns nil or the timeout passes.
func eventually(t *testing.T, what string, check func() error) {
	t.Helper()
	envtest.Eventually(t, timeout, what, check)
}

func get[O client.Object](t *testing.T, ns, name string, o O) (O, error) {
	t.Helper()
	err := env.Client.Get(ctxFor(t), types.NamespacedName{Namespace: ns, Name: name}, o)
	return o, err
}

func condition(sb *sandboxv1beta1.Sandbox, typ string) *metav1.Condition {
	for i := range sb.Status.Conditions {
		if sb.Status.Conditions[i].Type == typ {
			return &sb.Status.Conditions[i]
		}
	}
	return nil
}

// waitCondition waits until the Sandbox has the condition with status and reason.
func waitCondition(t *testing.T, ns, name, typ string, status metav1.ConditionStatus, reason string) *sandboxv1beta1.Sandbox {
	t.Helper()
	var sb *sandboxv1beta1.Sandbox
	eventually(t, fmt.Sprintf("%s=%s/%s", typ, status, reason), func() error {
		var err error
		sb, err = get(t, ns, name, &sandboxv1beta1.Sandbox{})
		if err != nil {
			return err
		}
		c := condition(sb, typ)
		if c == nil || c.Status != status || c.Reason != reason {
			return fmt.Errorf("condition is %+v", c)
		}
		return nil
	})
	return sb
}

// playKubelet binds the Pod to a node and reports it Running and Ready with
// an IP, as a kubelet would.
func playKubelet(t *testing.T, ns, name string) {
	t.Helper()
	ctx := ctxFor(t)
	var pod *corev1.Pod
	eventually(t, "pod exists", func() error {
		var err error
		pod, err = get(t, ns, name, &corev1.Pod{})
		return err
	})
	if pod.Spec.NodeName == "" {
		binding := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Target: corev1.ObjectReference{Kind: "Node", Name: "node-1"}}
		if err := env.Client.SubResource("binding").Create(ctx, pod, binding); err != nil {
			t.Fatalf("binding pod: %v", err)
		}
	}
	eventually(t, "pod status", func() error {
		pod, err := get(t, ns, name, &corev1.Pod{})
		if err != nil {
			return err
		}
		now := metav1.Now()
		pod.Status.Phase = corev1.PodRunning
		pod.Status.PodIP = "10.0.0.9"
		pod.Status.PodIPs = []corev1.PodIP{{IP: "10.0.0.9"}}
		pod.Status.Conditions = []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
		}
		return env.Client.Status().Update(ctx, pod)
	})
}

// playKubeletDeletion waits for the Pod to be deleted gracefully and finishes
// the deletion, as the kubelet would once its containers stopped.
func playKubeletDeletion(t *testing.T, ns, name string) {
	t.Helper()
	eventually(t, "pod deletion requested", func() error {
		pod, err := get(t, ns, name, &corev1.Pod{})
		if apierrors.IsNotFound(err) {
			return nil
		} else if err != nil {
			return err
		}
		if pod.DeletionTimestamp == nil {
			return fmt.Errorf("pod %s not being deleted", name)
		}
		return client.IgnoreNotFound(env.Client.Delete(ctxFor(t), pod, client.GracePeriodSeconds(0)))
	})
}

func TestCreateToReady(t *testing.T) {
	ns := env.Namespace(t)
	sb := create(t, newSandbox(ns, "box", withService(true), withVolume("data")))

	var pod *corev1.Pod
	eventually(t, "pod, service and pvc", func() error {
		var err error
		if pod, err = get(t, ns, "box", &corev1.Pod{}); err != nil {
			return err
		}
		if _, err := get(t, ns, "box", &corev1.Service{}); err != nil {
			return err
		}
		_, err = get(t, ns, "data-box", &corev1.PersistentVolumeClaim{})
		return err
	})
	hash := render.NameHash("box")
	if pod.Labels[sandboxv1beta1.LabelSandboxNameHash] != hash || pod.Labels["app"] != "demo" {
		t.Errorf("pod labels = %v", pod.Labels)
	}
	if ref := metav1.GetControllerOf(pod); ref == nil || ref.UID != sb.UID || ref.BlockOwnerDeletion == nil || !*ref.BlockOwnerDeletion {
		t.Errorf("pod controller = %+v, want the sandbox with blockOwnerDeletion", ref)
	}
	if pod.Spec.Hostname != "box" || pod.Spec.Subdomain != "box" {
		t.Errorf("hostname/subdomain = %q/%q, want box/box", pod.Spec.Hostname, pod.Spec.Subdomain)
	}
	if len(pod.Spec.Volumes) == 0 || pod.Spec.Volumes[len(pod.Spec.Volumes)-1].PersistentVolumeClaim == nil {
		t.Errorf("pod volumes = %+v, want the PVC", pod.Spec.Volumes)
	}
	svc, _ := get(t, ns, "box", &corev1.Service{})
	if svc.Spec.ClusterIP != corev1.ClusterIPNone || svc.Spec.Selector[sandboxv1beta1.LabelSandboxNameHash] != hash ||
		len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Name != "p-8080-tcp" {
		t.Errorf("service spec = %+v", svc.Spec)
	}

	waitCondition(t, ns, "box", sandboxv1beta1.ConditionReady, metav1.ConditionFalse, sandboxv1beta1.ReasonDependenciesNotReady)
	playKubelet(t, ns, "box")
	sb = waitCondition(t, ns, "box", sandboxv1beta1.ConditionReady, metav1.ConditionTrue, sandboxv1beta1.ReasonDependenciesReady)
	// As upstream: the Sandbox names the Pod it created.
	if got := sb.Annotations[sandboxv1beta1.AnnotationPodName]; got != "box" {
		t.Errorf("pod-name annotation = %q, want box", got)
	}
	// Upstream's exact texts.
	for typ, want := range map[string]string{
		sandboxv1beta1.ConditionReady:     "Pod is Ready; Service Exists",
		sandboxv1beta1.ConditionSuspended: "Sandbox is not suspended",
	} {
		if c := condition(sb, typ); c == nil || c.Message != want {
			t.Errorf("%s = %+v, want message %q", typ, c, want)
		}
	}
	st := sb.Status
	if st.ServiceFQDN != "box."+ns+".svc.cluster.local" || st.Service != "box" || st.NodeName != "node-1" ||
		len(st.PodIPs) != 1 || st.PodIPs[0] != "10.0.0.9" || st.LabelSelector != sandboxv1beta1.LabelSandboxNameHash+"="+hash {
		t.Errorf("status = %+v", st)
	}
	for _, typ := range []string{sandboxv1beta1.ConditionSuspended, sandboxv1beta1.ConditionPodScheduled} {
		if c := condition(sb, typ); c == nil || c.ObservedGeneration != sb.Generation {
			t.Errorf("condition %s = %+v, want present with observedGeneration %d", typ, c, sb.Generation)
		}
	}
}

// TestConvergedReconcileSendsNoRequests runs many reconciles of a converged
// Sandbox and counts the HTTP requests the controller sends: there must be none.
func TestConvergedReconcileSendsNoRequests(t *testing.T) {
	ns := env.Namespace(t)
	create(t, newSandbox(ns, "quiet", withService(true), withVolume("data")))
	playKubelet(t, ns, "quiet")
	waitCondition(t, ns, "quiet", sandboxv1beta1.ConditionReady, metav1.ConditionTrue, sandboxv1beta1.ReasonDependenciesReady)
	time.Sleep(500 * time.Millisecond) // let the last watch events land

	before := running.RequestsIn(ns)
	stats := engine.Stats()
	req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: "quiet"}}
	for range 20 {
		if _, err := reconciler.Reconcile(ctxFor(t), req); err != nil {
			t.Fatalf("reconcile: %v", err)
		}
	}
	if n := running.RequestsIn(ns) - before; n != 0 {
		t.Errorf("20 reconciles of a converged Sandbox sent %d API requests, want 0", n)
	}
	after := engine.Stats()
	if after.Skipped-stats.Skipped < 20*4 {
		t.Errorf("engine stats before %+v after %+v: want every object (pod, service, pvc, status) skipped on each reconcile", stats, after)
	}
}

// TestOtherManagersFieldsStay: another field manager adds a label and an
// annotation to our Pod and Service; reconciles keep them and do not write.
func TestOtherManagersFieldsStay(t *testing.T) {
	ns := env.Namespace(t)
	create(t, newSandbox(ns, "shared", withService(true)))
	playKubelet(t, ns, "shared")
	waitCondition(t, ns, "shared", sandboxv1beta1.ConditionReady, metav1.ConditionTrue, sandboxv1beta1.ReasonDependenciesReady)

	ctx := ctxFor(t)
	other := client.FieldOwner("gitops-tool")
	if err := env.Client.Apply(ctx, corev1ac.Pod("shared", ns).
		WithLabels(map[string]string{"cost-center": "42"}).WithAnnotations(map[string]string{"owner": "team-a"}), other); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Apply(ctx, corev1ac.Service("shared", ns).
		WithLabels(map[string]string{"cost-center": "42"}).WithAnnotations(map[string]string{"owner": "team-a"}), other); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	pod, _ := get(t, ns, "shared", &corev1.Pod{})
	svc, _ := get(t, ns, "shared", &corev1.Service{})
	podRV, svcRV := pod.ResourceVersion, svc.ResourceVersion

	before := running.RequestsIn(ns)
	req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: "shared"}}
	for range 20 {
		if _, err := reconciler.Reconcile(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	if n := running.RequestsIn(ns) - before; n != 0 {
		t.Errorf("reconciles sent %d requests after another manager's edit, want 0", n)
	}
	pod, _ = get(t, ns, "shared", &corev1.Pod{})
	svc, _ = get(t, ns, "shared", &corev1.Service{})
	for _, o := range []client.Object{pod, svc} {
		if o.GetLabels()["cost-center"] != "42" || o.GetAnnotations()["owner"] != "team-a" || o.GetLabels()["app"] != "demo" && o == client.Object(pod) {
			t.Errorf("%T labels %v annotations %v: the other manager's fields (or ours) are gone", o, o.GetLabels(), o.GetAnnotations())
		}
	}
	if pod.ResourceVersion != podRV || svc.ResourceVersion != svcRV {
		t.Errorf("objects changed (pod %s -> %s, service %s -> %s): the controller flapped", podRV, pod.ResourceVersion, svcRV, svc.ResourceVersion)
	}
}

// TestConflictIsReportedNotFought: another manager takes over a label we set,
// with a different value; we report the conflict instead of taking it back.
func TestConflictIsReportedNotFought(t *testing.T) {
	ns := env.Namespace(t)
	create(t, newSandbox(ns, "contested"))
	ctx := ctxFor(t)
	eventually(t, "pod", func() error { _, err := get(t, ns, "contested", &corev1.Pod{}); return err })
	if err := env.Client.Apply(ctx, corev1ac.Pod("contested", ns).WithLabels(map[string]string{"app": "theirs"}),
		client.FieldOwner("human"), client.ForceOwnership); err != nil {
		t.Fatal(err)
	}
	// Our template changes the label too, so we would have to write it.
	update(t, ns, "contested", func(sb *sandboxv1beta1.Sandbox) { sb.Spec.PodTemplate.ObjectMeta.Labels["app"] = "ours-v2" })
	sb := waitCondition(t, ns, "contested", sandboxv1beta1.ConditionReady, metav1.ConditionFalse, sandboxv1beta1.ReasonReconcilerError)
	if msg := condition(sb, sandboxv1beta1.ConditionReady).Message; !strings.Contains(msg, "conflict") || !strings.Contains(msg, "human") {
		t.Errorf("Ready message = %q, want it to name the conflict and the other manager", msg)
	}
	pod, _ := get(t, ns, "contested", &corev1.Pod{})
	if pod.Labels["app"] != "theirs" {
		t.Errorf("label app = %q: the controller overwrote another manager's field", pod.Labels["app"])
	}
}

func TestServiceToggle(t *testing.T) {
	ns := env.Namespace(t)
	create(t, newSandbox(ns, "toggle"))
	eventually(t, "pod", func() error { _, err := get(t, ns, "toggle", &corev1.Pod{}); return err })
	time.Sleep(300 * time.Millisecond)
	if _, err := get(t, ns, "toggle", &corev1.Service{}); !apierrors.IsNotFound(err) {
		t.Fatalf("service unset: got service (err %v), want none", err)
	}

	setService := func(v *bool) {
		t.Helper()
		update(t, ns, "toggle", func(sb *sandboxv1beta1.Sandbox) { sb.Spec.Service = v })
	}
	setService(ptr.To(true))
	eventually(t, "service created", func() error { _, err := get(t, ns, "toggle", &corev1.Service{}); return err })
	setService(nil)
	time.Sleep(300 * time.Millisecond)
	if _, err := get(t, ns, "toggle", &corev1.Service{}); err != nil {
		t.Fatalf("service unset after true: the existing Service must be kept: %v", err)
	}
	setService(ptr.To(false))
	eventually(t, "service deleted", func() error {
		if _, err := get(t, ns, "toggle", &corev1.Service{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there (err %w)", err)
		}
		return nil
	})
}

func TestSuspendResumeKeepsServiceAndPVC(t *testing.T) {
	ns := env.Namespace(t)
	create(t, newSandbox(ns, "napper", withService(true), withVolume("home")))
	playKubelet(t, ns, "napper")
	waitCondition(t, ns, "napper", sandboxv1beta1.ConditionReady, metav1.ConditionTrue, sandboxv1beta1.ReasonDependenciesReady)
	pvc, _ := get(t, ns, "home-napper", &corev1.PersistentVolumeClaim{})

	setMode := func(m sandboxv1beta1.SandboxOperatingMode) {
		t.Helper()
		update(t, ns, "napper", func(sb *sandboxv1beta1.Sandbox) { sb.Spec.OperatingMode = m })
	}
	setMode(sandboxv1beta1.SandboxOperatingModeSuspended)
	waitCondition(t, ns, "napper", sandboxv1beta1.ConditionSuspended, metav1.ConditionFalse, sandboxv1beta1.ReasonPodTerminating)
	playKubeletDeletion(t, ns, "napper")
	sb := waitCondition(t, ns, "napper", sandboxv1beta1.ConditionSuspended, metav1.ConditionTrue, sandboxv1beta1.ReasonPodTerminated)
	if c := condition(sb, sandboxv1beta1.ConditionReady); c.Reason != sandboxv1beta1.ReasonSandboxSuspended || c.Message != "Sandbox is suspended" {
		t.Errorf("Ready = %+v, want SandboxSuspended: Sandbox is suspended", c)
	}
	if c := condition(sb, sandboxv1beta1.ConditionSuspended); c.Message != "Pod has been terminated. Sandbox is suspended" {
		t.Errorf("Suspended = %+v", c)
	}
	if len(sb.Status.PodIPs) != 0 || sb.Status.NodeName != "" || condition(sb, sandboxv1beta1.ConditionPodScheduled) != nil {
		t.Errorf("suspended status still shows the pod: %+v", sb.Status)
	}
	eventually(t, "pod-name annotation removed while suspended", func() error {
		cur, err := get(t, ns, "napper", &sandboxv1beta1.Sandbox{})
		if err != nil {
			return err
		}
		if v, ok := cur.Annotations[sandboxv1beta1.AnnotationPodName]; ok {
			return fmt.Errorf("pod-name = %q", v)
		}
		return nil
	})
	// As upstream: the selector stays while suspended.
	if want := sandboxv1beta1.LabelSandboxNameHash + "=" + render.NameHash("napper"); sb.Status.LabelSelector != want {
		t.Errorf("selector = %q while suspended, want %q", sb.Status.LabelSelector, want)
	}
	if _, err := get(t, ns, "napper", &corev1.Pod{}); !apierrors.IsNotFound(err) {
		t.Errorf("pod still exists after suspend (err %v)", err)
	}
	if _, err := get(t, ns, "napper", &corev1.Service{}); err != nil {
		t.Errorf("service gone after suspend: %v", err)
	}
	if p, err := get(t, ns, "home-napper", &corev1.PersistentVolumeClaim{}); err != nil || p.UID != pvc.UID {
		t.Errorf("pvc changed after suspend: %v", err)
	}

	setMode(sandboxv1beta1.SandboxOperatingModeRunning)
	playKubelet(t, ns, "napper")
	waitCondition(t, ns, "napper", sandboxv1beta1.ConditionReady, metav1.ConditionTrue, sandboxv1beta1.ReasonDependenciesReady)
	if p, err := get(t, ns, "home-napper", &corev1.PersistentVolumeClaim{}); err != nil || p.UID != pvc.UID {
		t.Errorf("resume did not reuse the same PVC: %v", err)
	}
}

func TestExpiry(t *testing.T) {
	t.Run("Retain at a future time", func(t *testing.T) {
		ns := env.Namespace(t)
		at := metav1.NewTime(time.Now().Add(3 * time.Second))
		create(t, newSandbox(ns, "timer", withService(true), withVolume("data"), func(sb *sandboxv1beta1.Sandbox) {
			sb.Spec.ShutdownTime = &at
		}))
		playKubelet(t, ns, "timer")
		sb := waitCondition(t, ns, "timer", sandboxv1beta1.ConditionReady, metav1.ConditionFalse, sandboxv1beta1.ReasonSandboxExpired)
		playKubeletDeletion(t, ns, "timer")
		if c := condition(sb, sandboxv1beta1.ConditionReady); c.LastTransitionTime.Time.Before(at.Add(-time.Second)) {
			t.Errorf("expired at %s, before shutdownTime %s", c.LastTransitionTime, at)
		}
		for _, o := range []client.Object{&corev1.Pod{}, &corev1.Service{}} {
			if _, err := get(t, ns, "timer", o); !apierrors.IsNotFound(err) {
				t.Errorf("%T still exists after expiry (err %v)", o, err)
			}
		}
		if _, err := get(t, ns, "data-timer", &corev1.PersistentVolumeClaim{}); err != nil {
			t.Errorf("pvc deleted by expiry: %v", err)
		}
		if sb.Status.Service != "" || len(sb.Status.PodIPs) != 0 || sb.Status.LabelSelector != "" {
			t.Errorf("expired Retain status not cleared: %+v", sb.Status)
		}
	})
	t.Run("Delete", func(t *testing.T) {
		ns := env.Namespace(t)
		past := metav1.NewTime(time.Now().Add(-time.Minute))
		create(t, newSandbox(ns, "gone", func(sb *sandboxv1beta1.Sandbox) {
			sb.Spec.ShutdownTime = &past
			sb.Spec.ShutdownPolicy = ptr.To(sandboxv1beta1.ShutdownPolicyDelete)
		}))
		eventually(t, "sandbox deleted", func() error {
			if _, err := get(t, ns, "gone", &sandboxv1beta1.Sandbox{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("still there (err %w)", err)
			}
			return nil
		})
		if _, err := get(t, ns, "gone", &corev1.Pod{}); !apierrors.IsNotFound(err) {
			t.Errorf("an expired sandbox got a pod (err %v)", err)
		}
	})
}

func TestAdoption(t *testing.T) {
	ns := env.Namespace(t)
	ctx := ctxFor(t)
	orphan := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "adoptee", Labels: map[string]string{sandboxv1beta1.LabelAdoptable: "true"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "demo:1"}}},
	}
	if err := env.Client.Create(ctx, orphan); err != nil {
		t.Fatal(err)
	}
	sb := create(t, newSandbox(ns, "adoptee"))
	eventually(t, "pod adopted", func() error {
		pod, err := get(t, ns, "adoptee", &corev1.Pod{})
		if err != nil {
			return err
		}
		if ref := metav1.GetControllerOf(pod); ref == nil || ref.UID != sb.UID {
			return fmt.Errorf("controller = %+v", ref)
		}
		if pod.UID != orphan.UID {
			return fmt.Errorf("pod was replaced, not adopted")
		}
		return nil
	})
}

func TestForeignPodIsNotTaken(t *testing.T) {
	ns := env.Namespace(t)
	foreign := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "taken"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "other"}}},
	}
	if err := env.Client.Create(ctxFor(t), foreign); err != nil {
		t.Fatal(err)
	}
	create(t, newSandbox(ns, "taken"))
	sb := waitCondition(t, ns, "taken", sandboxv1beta1.ConditionReady, metav1.ConditionFalse, sandboxv1beta1.ReasonReconcilerError)
	// Upstream's text, which names the label that lets the Sandbox adopt it.
	want := `Error seen: cannot adopt unowned pod "taken": missing required pool authorization label ("agents.x-k8s.io/adoptable") or sandbox tracking label ("agents.x-k8s.io/sandbox-name-hash")`
	if msg := condition(sb, sandboxv1beta1.ConditionReady).Message; msg != want {
		t.Errorf("message %q, want %q", msg, want)
	}
	if c := condition(sb, sandboxv1beta1.ConditionPodScheduled); c == nil || c.Status != metav1.ConditionUnknown || c.Reason != sandboxv1beta1.ReasonPodSchedulingUnknown {
		t.Errorf("PodScheduled = %+v, want Unknown/PodSchedulingUnknown", c)
	}
	pod, _ := get(t, ns, "taken", &corev1.Pod{})
	if metav1.GetControllerOf(pod) != nil || pod.Spec.Containers[0].Image != "other" {
		t.Errorf("foreign pod was modified: %+v", pod.OwnerReferences)
	}
}

func TestMultiplePodsFailClosed(t *testing.T) {
	ns := env.Namespace(t)
	sb := create(t, newSandbox(ns, "twin"))
	eventually(t, "pod", func() error { _, err := get(t, ns, "twin", &corev1.Pod{}); return err })
	second := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "twin-2", OwnerReferences: []metav1.OwnerReference{{
			APIVersion: sandboxv1beta1.GroupVersion.String(), Kind: "Sandbox", Name: "twin", UID: sb.UID, Controller: ptr.To(true),
		}}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "demo:1"}}},
	}
	if err := env.Client.Create(ctxFor(t), second); err != nil {
		t.Fatal(err)
	}
	waitCondition(t, ns, "twin", sandboxv1beta1.ConditionReady, metav1.ConditionFalse, sandboxv1beta1.ReasonMultiplePods)
	// Suspending must not delete either pod while the Sandbox fails closed.
	update(t, ns, "twin", func(sb *sandboxv1beta1.Sandbox) { sb.Spec.OperatingMode = sandboxv1beta1.SandboxOperatingModeSuspended })
	time.Sleep(500 * time.Millisecond)
	for _, name := range []string{"twin", "twin-2"} {
		if _, err := get(t, ns, name, &corev1.Pod{}); err != nil {
			t.Errorf("pod %s touched while failing closed: %v", name, err)
		}
	}
}

func TestPodTemplateDriftReportedNotForced(t *testing.T) {
	ns := env.Namespace(t)
	create(t, newSandbox(ns, "drifty"))
	playKubelet(t, ns, "drifty")
	waitCondition(t, ns, "drifty", sandboxv1beta1.ConditionReady, metav1.ConditionTrue, sandboxv1beta1.ReasonDependenciesReady)

	update(t, ns, "drifty", func(sb *sandboxv1beta1.Sandbox) {
		sb.Spec.PodTemplate.Spec.Containers[0].Image = "demo:2"
		sb.Spec.PodTemplate.ObjectMeta.Labels["version"] = "2"
	})
	// Reported by an event only: upstream's status has no place for it.
	eventually(t, "drift event", func() error {
		var evs eventsv1.EventList
		if err := env.Client.List(ctxFor(t), &evs, client.InNamespace(ns)); err != nil {
			return err
		}
		for _, e := range evs.Items {
			if e.Reason == "PodTemplateDrift" && e.Regarding.Name == "drifty" {
				return nil
			}
		}
		return fmt.Errorf("no PodTemplateDrift event among %d", len(evs.Items))
	})
	sb, _ := get(t, ns, "drifty", &sandboxv1beta1.Sandbox{})
	for _, c := range sb.Status.Conditions {
		switch c.Type {
		case sandboxv1beta1.ConditionReady, sandboxv1beta1.ConditionSuspended, sandboxv1beta1.ConditionPodScheduled:
		default:
			t.Errorf("condition %s is not one upstream writes", c.Type)
		}
	}
	pod, _ := get(t, ns, "drifty", &corev1.Pod{})
	if pod.Spec.Containers[0].Image != "demo:1" {
		t.Errorf("running pod image = %s, want it unchanged (demo:1)", pod.Spec.Containers[0].Image)
	}
	eventually(t, "metadata still applied", func() error {
		pod, _ := get(t, ns, "drifty", &corev1.Pod{})
		if pod.Labels["version"] != "2" {
			return fmt.Errorf("labels %v", pod.Labels)
		}
		return nil
	})
}

// TestForeignServiceIsReportedThenAdopted: a Service in the way is reported,
// left alone, and adopted once its owner labels it adoptable.
func TestForeignServiceIsReportedThenAdopted(t *testing.T) {
	ns := env.Namespace(t)
	ctx := ctxFor(t)
	// As another controller (the public one, before a migration) would
	// have made it, without the labels that mark it ours.
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: corev1.ServiceSpec{
			ClusterIP: corev1.ClusterIPNone,
			Selector:  map[string]string{sandboxv1beta1.LabelSandboxNameHash: render.NameHash("web")},
			Ports:     []corev1.ServicePort{{Name: "p-8080-tcp", Port: 8080}},
		},
	}
	if err := env.Client.Create(ctx, svc); err != nil {
		t.Fatal(err)
	}
	sb := create(t, newSandbox(ns, "web", withService(true)))
	got := waitCondition(t, ns, "web", sandboxv1beta1.ConditionReady, metav1.ConditionFalse, sandboxv1beta1.ReasonReconcilerError)
	if msg := condition(got, sandboxv1beta1.ConditionReady).Message; !strings.Contains(msg, `Error seen: cannot adopt unowned service "web"`) {
		t.Errorf("message = %q", msg)
	}
	live, _ := get(t, ns, "web", &corev1.Service{})
	if metav1.GetControllerOf(live) != nil || len(live.Labels) != 0 {
		t.Fatalf("foreign service was modified: %+v", live)
	}
	live.Labels = map[string]string{sandboxv1beta1.LabelAdoptable: "true"}
	if err := env.Client.Update(ctx, live); err != nil {
		t.Fatal(err)
	}
	eventually(t, "service adopted", func() error {
		live, err := get(t, ns, "web", &corev1.Service{})
		if err != nil {
			return err
		}
		if ref := metav1.GetControllerOf(live); ref == nil || ref.UID != sb.UID {
			cur, _ := get(t, ns, "web", &sandboxv1beta1.Sandbox{})
			return fmt.Errorf("controller = %+v; sandbox Ready = %+v", ref, condition(cur, sandboxv1beta1.ConditionReady))
		}
		return nil
	})
}

// TestIncompatibleAdoptionIsTerminal: an adoptable Service that cannot become
// the Sandbox's (a ClusterIP Service: clusterIP is immutable) is reported
// once, not retried with backoff.
func TestIncompatibleAdoptionIsTerminal(t *testing.T) {
	ns := env.Namespace(t)
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "api", Labels: map[string]string{sandboxv1beta1.LabelAdoptable: "true"}},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}},
	}
	if err := env.Client.Create(ctxFor(t), svc); err != nil {
		t.Fatal(err)
	}
	create(t, newSandbox(ns, "api", withService(true)))
	sb := waitCondition(t, ns, "api", sandboxv1beta1.ConditionReady, metav1.ConditionFalse, sandboxv1beta1.ReasonReconcilerError)
	if msg := condition(sb, sandboxv1beta1.ConditionReady).Message; !strings.Contains(msg, `Error seen: cannot adopt service "api": ClusterIP is "`) ||
		!strings.Contains(msg, `(expected "None", field is immutable)`) {
		t.Errorf("message = %q, want upstream's ClusterIP refusal", msg)
	}
	if sb.Status.Service != "" || sb.Status.ServiceFQDN != "" {
		t.Errorf("status names the Service it could not take: %q %q", sb.Status.Service, sb.Status.ServiceFQDN)
	}
	before := running.RequestsIn(ns)
	time.Sleep(3 * time.Second)
	if n := running.RequestsIn(ns) - before; n > 0 {
		t.Errorf("%d requests in 3s after a terminal error: the reconciler is retrying", n)
	}
}
