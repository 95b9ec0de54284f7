package router

import (
	"context"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	"github.com/agentsandbox/reconciler/dataplane/resume"
)

// testSandbox is a Sandbox named name in "team", controlled by a kind of
// the extensions group ("" for none).
func testSandbox(name, ownerKind string) *sandboxv1beta1.Sandbox {
	sb := &sandboxv1beta1.Sandbox{
		TypeMeta:   metav1.TypeMeta{APIVersion: sandboxv1beta1.GroupVersion.String(), Kind: "Sandbox"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "team", UID: types.UID("uid-" + name)},
	}
	if ownerKind != "" {
		sb.OwnerReferences = []metav1.OwnerReference{{APIVersion: extv1beta1.GroupVersion.String(), Kind: ownerKind,
			Name: "owner", UID: "owner-uid", Controller: ptr.To(true)}}
	}
	return sb
}

// testPod is a Running, Ready Pod controlled by sb with the given IPs.
func testPod(sb *sandboxv1beta1.Sandbox, name string, ips ...string) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: sb.Namespace, UID: types.UID("pod-" + name),
			Labels:          map[string]string{sandboxv1beta1.LabelSandboxNameHash: "12345678"},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(sb, sandboxv1beta1.GroupVersion.WithKind("Sandbox"))}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
	}
	for _, ip := range ips {
		p.Status.PodIPs = append(p.Status.PodIPs, corev1.PodIP{IP: ip})
	}
	if len(ips) > 0 {
		p.Status.PodIP = ips[0]
	}
	return p
}

func testReader(t *testing.T, objs ...client.Object) client.Reader {
	t.Helper()
	return fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(objs...).Build()
}

// testScheme knows the core kinds and Sandboxes, as the router's cache.
func testScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := sandboxv1beta1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestRoute(t *testing.T) {
	standalone := testSandbox("box", "")
	for _, tc := range []struct {
		name   string
		sb     *sandboxv1beta1.Sandbox
		pod    func(*sandboxv1beta1.Sandbox) *corev1.Pod
		target Target
		status int
		reason string
		ip     string
	}{
		{name: "standalone", sb: standalone, ip: "10.0.0.5"},
		{name: "claimed", sb: testSandbox("box", "SandboxClaim"), ip: "10.0.0.5"},
		{name: "unclaimed warm member", sb: testSandbox("box", "SandboxWarmPool"), status: http.StatusForbidden, reason: ReasonWarmMember},
		{name: "pool label without the owner", sb: func() *sandboxv1beta1.Sandbox {
			sb := testSandbox("box", "")
			sb.Labels = map[string]string{sandboxv1beta1.LabelWarmPoolSandbox: "abcd1234"}
			return sb
		}(), status: http.StatusForbidden, reason: ReasonWarmMember},
		{name: "no pod", sb: standalone, pod: func(*sandboxv1beta1.Sandbox) *corev1.Pod { return nil }, status: http.StatusConflict, reason: ReasonNotReady},
		{name: "pod not ready", sb: standalone, pod: func(sb *sandboxv1beta1.Sandbox) *corev1.Pod {
			p := testPod(sb, "box", "10.0.0.5")
			p.Status.Conditions[0].Status = corev1.ConditionFalse
			return p
		}, status: http.StatusConflict, reason: ReasonNotReady},
		{name: "pod pending", sb: standalone, pod: func(sb *sandboxv1beta1.Sandbox) *corev1.Pod {
			p := testPod(sb, "box")
			p.Status.Phase = corev1.PodPending
			return p
		}, status: http.StatusConflict, reason: ReasonNotReady},
		{name: "pod terminating", sb: standalone, pod: func(sb *sandboxv1beta1.Sandbox) *corev1.Pod {
			p := testPod(sb, "box", "10.0.0.5")
			p.DeletionTimestamp = &metav1.Time{}
			return p
		}, status: http.StatusConflict, reason: ReasonNotReady},
		{name: "pod without ip", sb: standalone, pod: func(sb *sandboxv1beta1.Sandbox) *corev1.Pod { return testPod(sb, "box") },
			status: http.StatusConflict, reason: ReasonNotReady},
		{name: "pod of another sandbox", sb: standalone, pod: func(*sandboxv1beta1.Sandbox) *corev1.Pod {
			return testPod(testSandbox("other", ""), "box", "10.0.0.5")
		}, status: http.StatusConflict, reason: ReasonNotReady},
		{name: "sandbox being deleted", sb: func() *sandboxv1beta1.Sandbox {
			sb := testSandbox("box", "")
			sb.DeletionTimestamp = &metav1.Time{}
			return sb
		}(), status: http.StatusConflict, reason: ReasonNotReady},
		{name: "uid matches", sb: standalone, target: Target{UID: "uid-box"}, ip: "10.0.0.5"},
		{name: "uid of an earlier sandbox", sb: standalone, target: Target{UID: "uid-old"}, status: http.StatusNotFound, reason: ReasonUIDMismatch},
		{name: "ipv4 first", sb: standalone, pod: func(sb *sandboxv1beta1.Sandbox) *corev1.Pod { return testPod(sb, "box", "fd00::5", "10.0.0.5") }, ip: "10.0.0.5"},
		{name: "the caller's pod ip", sb: standalone, pod: func(sb *sandboxv1beta1.Sandbox) *corev1.Pod { return testPod(sb, "box", "10.0.0.5", "fd00::5") },
			target: Target{PodIP: netip.MustParseAddr("fd00::5")}, ip: "fd00::5"},
		{name: "a stale pod ip", sb: standalone, target: Target{PodIP: netip.MustParseAddr("10.0.0.9")}, status: http.StatusConflict, reason: ReasonPodIPMismatch},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := testPod(tc.sb, "box", "10.0.0.5")
			if tc.pod != nil {
				pod = tc.pod(tc.sb)
			}
			target := tc.target
			target.ID, target.Namespace, target.Port = "box", "team", 8888
			ep, err := Route(tc.sb, pod, target)
			if tc.status != 0 {
				if err == nil || err.Status != tc.status || err.Reason != tc.reason || !err.Retry {
					t.Fatalf("got %+v, %+v; want a retryable %d %s", ep, err, tc.status, tc.reason)
				}
				return
			}
			if err != nil {
				t.Fatalf("refused: %+v", err)
			}
			if ep.IP.String() != tc.ip || ep.Pod != "box" || ep.PodUID != "pod-box" || ep.Port != 8888 || ep.Source != SourceCache {
				t.Errorf("endpoint %+v, want pod box at %s:8888", ep, tc.ip)
			}
		})
	}
}

func TestCacheResolver(t *testing.T) {
	ctx := context.Background()
	adopted := testSandbox("adopted", "SandboxClaim")
	adopted.Annotations = map[string]string{sandboxv1beta1.AnnotationPodName: "pool-x7k2p"}
	warm := testSandbox("pool-b4c9d", "SandboxWarmPool")
	reader := testReader(t, adopted, testPod(adopted, "pool-x7k2p", "10.0.0.7"), warm, testPod(warm, "pool-b4c9d", "10.0.0.8"))
	target := func(id string) Target { return Target{ID: id, Namespace: "team", Port: 8888} }

	r := &CacheResolver{Reader: reader, ClusterDomain: "cluster.local"}
	ep, err := r.Resolve(ctx, target("adopted"))
	if err != nil || ep.Pod != "pool-x7k2p" || ep.IP.String() != "10.0.0.7" {
		t.Errorf("a claimed Sandbox's Pod from its pod-name annotation: %+v, %v", ep, err)
	}
	if _, err := r.Resolve(ctx, target("pool-b4c9d")); AsError(err).Reason != ReasonWarmMember {
		t.Errorf("a warm member: %v, want refused", err)
	}
	if _, err := r.Resolve(ctx, target("missing")); AsError(err).Status != http.StatusNotFound {
		t.Errorf("a missing Sandbox: %v, want 404", err)
	}

	if _, err := (&CacheResolver{Reader: reader, Namespaces: []string{"other"}}).Resolve(ctx, target("adopted")); AsError(err).Status != http.StatusNotFound {
		t.Errorf("a Sandbox outside the routed namespaces: %v, want 404", err)
	}

	r.DNSFallback = true
	r.DNS = startDNS(t, map[string][]netip.Addr{"missing.team.svc.cluster.local": {netip.MustParseAddr("10.0.0.9")}}).Resolver()
	if ep, err := r.Resolve(ctx, target("missing")); err != nil || ep.Host != "missing.team.svc.cluster.local" || ep.IP.String() != "10.0.0.9" || ep.Source != SourceDNS {
		t.Errorf("DNS fallback: %+v, %v", ep, err)
	}
	withIP := target("missing")
	withIP.PodIP = netip.MustParseAddr("10.1.2.3")
	if ep, err := r.Resolve(ctx, withIP); err != nil || ep.IP != withIP.PodIP || ep.Source != SourcePodIP {
		t.Errorf("DNS fallback with X-Sandbox-Pod-IP: %+v, %v", ep, err)
	}
	if _, err := r.Resolve(ctx, target("pool-b4c9d")); AsError(err).Reason != ReasonWarmMember {
		t.Errorf("the fallback is for unknown Sandboxes only; a warm member: %v, want refused", err)
	}
	// A handle pinned to a UID whose Sandbox the cache does not hold is
	// not sent to whatever DNS finds under the name.
	pinned := target("missing")
	pinned.UID = "uid-missing"
	if ep, err := r.Resolve(ctx, pinned); err == nil || AsError(err).Status != http.StatusNotFound {
		t.Errorf("DNS fallback with X-Sandbox-UID: %+v, %v; want 404", ep, err)
	}
}

// TestRouteSuspended: a Suspended Sandbox is never routed; one that did
// not opt in to resume on connect is refused with how to opt in, one that
// did is handed to the resume (Resume set); an opted-in Sandbox that is
// starting is waited for; a warm member is refused as such, opted in or not.
func TestRouteSuspended(t *testing.T) {
	target := Target{ID: "box", Namespace: "team", Port: 8888}
	suspended := func(annotations map[string]string) *sandboxv1beta1.Sandbox {
		sb := testSandbox("box", "")
		sb.Annotations = annotations
		sb.Spec.OperatingMode = sandboxv1beta1.SandboxOperatingModeSuspended
		return sb
	}
	optIn := map[string]string{sandboxv1beta1.AnnotationResumeOnConnect: "true"}

	_, err := Route(suspended(nil), nil, target)
	if err == nil || err.Status != http.StatusConflict || err.Reason != ReasonSuspended || err.Resume != nil || err.Retry {
		t.Fatalf("not opted in: %+v", err)
	}
	if !strings.Contains(err.Detail, "team/box is suspended") || !strings.Contains(err.Detail, sandboxv1beta1.OptInHint) {
		t.Errorf("the refusal does not say how to opt in: %s", err.Detail)
	}
	_, err = Route(suspended(map[string]string{sandboxv1beta1.AnnotationResumeOnConnect: "yes"}), nil, target)
	if err == nil || err.Resume != nil || !strings.Contains(err.Detail, `"yes" is not a boolean`) {
		t.Errorf("an invalid opt-in: %+v", err)
	}
	if _, err := Route(suspended(map[string]string{sandboxv1beta1.AnnotationResumeOnConnect: "false"}), nil, target); err == nil || err.Resume != nil {
		t.Errorf("opted out: %+v", err)
	}

	for name, annotations := range map[string]map[string]string{"resume-on-connect": optIn, "idle-timeout": {sandboxv1beta1.AnnotationIdleTimeout: "15m"}} {
		_, err := Route(suspended(annotations), nil, target)
		want := &Resumable{Key: resume.Key{Namespace: "team", Name: "box", UID: "uid-box"}, Suspended: true}
		if err == nil || err.Status != http.StatusConflict || err.Reason != ReasonSuspended || err.Resume == nil || *err.Resume != *want {
			t.Errorf("opted in by %s: %+v, want Resume %+v", name, err, want)
		}
	}

	starting := testSandbox("box", "")
	starting.Annotations = optIn
	_, err = Route(starting, nil, target)
	if err == nil || err.Reason != ReasonNotReady || err.Resume == nil || err.Resume.Suspended {
		t.Errorf("opted in, Running, no pod yet: %+v, want a resumable not-ready", err)
	}
	if _, err := Route(testSandbox("box", ""), nil, target); err == nil || err.Resume != nil {
		t.Errorf("not opted in, no pod yet: %+v, want a plain not-ready", err)
	}
	deleting := suspended(optIn)
	deleting.DeletionTimestamp = &metav1.Time{}
	if _, err := Route(deleting, nil, target); err == nil || err.Resume != nil {
		t.Errorf("opted in, being deleted: %+v, want no resume", err)
	}
	warm := testSandbox("box", "SandboxWarmPool")
	warm.Annotations, warm.Spec.OperatingMode = optIn, sandboxv1beta1.SandboxOperatingModeSuspended
	if _, err := Route(warm, nil, target); err == nil || err.Status != http.StatusForbidden || err.Resume != nil {
		t.Errorf("an opted-in unclaimed warm member: %+v, want 403 and no resume", err)
	}

	idle := testSandbox("box", "")
	idle.Annotations = map[string]string{sandboxv1beta1.AnnotationIdleTimeout: "10m"}
	if ep, err := Route(idle, testPod(idle, "box", "10.0.0.5"), target); err != nil || ep.IdleTimeout != 10*time.Minute || ep.SandboxUID != "uid-box" {
		t.Errorf("a Running Sandbox with idle suspend: %+v, %v", ep, err)
	}
}

// TestTrimSandbox: the cache keeps of a Sandbox what routing and resume
// read, and nothing else.
func TestTrimSandbox(t *testing.T) {
	sb := testSandbox("box", "SandboxClaim")
	sb.Annotations = map[string]string{
		sandboxv1beta1.AnnotationPodName: "pool-x7k2p", sandboxv1beta1.AnnotationResumeOnConnect: "true",
		sandboxv1beta1.AnnotationIdleTimeout: "1h", sandboxv1beta1.AnnotationLastActivity: "2026-01-01T00:00:00Z", "other": "x",
	}
	sb.Labels = map[string]string{sandboxv1beta1.LabelWarmPoolSandbox: "abcd", "app": "x"}
	sb.ResourceVersion, sb.Generation = "7", 3
	sb.Spec.OperatingMode = sandboxv1beta1.SandboxOperatingModeSuspended
	sb.Spec.PodTemplate.Spec.Containers = []corev1.Container{{Name: "main", Image: "python"}}
	sb.Status.ServiceFQDN = "box.team.svc"
	got, err := trimSandbox(sb)
	if err != nil {
		t.Fatal(err)
	}
	want := &sandboxv1beta1.Sandbox{
		TypeMeta: sb.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{Name: "box", Namespace: "team", UID: "uid-box", ResourceVersion: "7", OwnerReferences: sb.OwnerReferences,
			Labels: map[string]string{sandboxv1beta1.LabelWarmPoolSandbox: "abcd"},
			Annotations: map[string]string{sandboxv1beta1.AnnotationPodName: "pool-x7k2p", sandboxv1beta1.AnnotationResumeOnConnect: "true",
				sandboxv1beta1.AnnotationIdleTimeout: "1h"}},
		Spec: sandboxv1beta1.SandboxSpec{OperatingMode: sandboxv1beta1.SandboxOperatingModeSuspended},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("trimmed (-want +got):\n%s", diff)
	}
}
