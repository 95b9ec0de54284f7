package e2e

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
)

// The status walk compares what a client sees: every condition without its
// lastTransitionTime, every status field, and the agents.x-k8s.io
// annotations, with Pod IPs and node names reduced to "present" and
// timestamps in annotations to their format.

// cond is a condition as compared: everything but lastTransitionTime.
type cond struct {
	Type, Status, Reason, Message string
	ObservedGeneration            int64
}

func condOf(t string, s metav1.ConditionStatus, reason, message string, gen int64) cond {
	return cond{Type: t, Status: string(s), Reason: reason, Message: message, ObservedGeneration: gen}
}

// sandboxView is a Sandbox's status (and annotations) as compared.
type sandboxView struct {
	Conditions  []cond
	Service     string
	ServiceFQDN string
	Selector    string
	PodIPs      bool // status.podIPs is not empty
	NodeName    bool // status.nodeName is set
	Annotations map[string]string
}

// claimView is a claim's status (and annotations) as compared.
type claimView struct {
	Conditions  []cond
	Sandbox     string // status.sandbox.name
	PodIPs      bool   // status.sandbox.podIPs is not empty
	Annotations map[string]string
}

// poolView is a warm pool's status as compared.
type poolView struct {
	Replicas, ReadyReplicas int32
	Selector                string
	ObservedGeneration      int64
	Conditions              []cond
}

func conds(in []metav1.Condition) []cond {
	out := make([]cond, 0, len(in))
	for _, c := range in {
		out = append(out, condOf(c.Type, c.Status, c.Reason, c.Message, c.ObservedGeneration))
	}
	return out
}

// timeAnnotations hold timestamps: compared as "<rfc3339nano-utc>" when
// they parse as RFC 3339 and are in UTC, as written otherwise.
var timeAnnotations = []string{extv1beta1.AnnotationControllerFirstObservedAt, extv1beta1.AnnotationClaimFirstReadyAt}

const utcTime = "<rfc3339nano-utc>"

func annotations(in map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range in {
		if !strings.HasPrefix(k, sandboxv1beta1.GroupName+"/") {
			continue
		}
		if slices.Contains(timeAnnotations, k) {
			if ts, err := time.Parse(time.RFC3339Nano, v); err == nil && ts.Location() == time.UTC && strings.HasSuffix(v, "Z") {
				v = utcTime
			}
		}
		out[k] = v
	}
	return out
}

func viewSandbox(sb *sandboxv1beta1.Sandbox) sandboxView {
	return sandboxView{
		Conditions: conds(sb.Status.Conditions), Service: sb.Status.Service, ServiceFQDN: sb.Status.ServiceFQDN,
		Selector: sb.Status.LabelSelector, PodIPs: len(sb.Status.PodIPs) > 0, NodeName: sb.Status.NodeName != "",
		Annotations: annotations(sb.Annotations),
	}
}

func viewClaim(cl *extv1beta1.SandboxClaim) claimView {
	return claimView{
		Conditions: conds(cl.Status.Conditions), Sandbox: cl.Status.Sandbox.Name,
		PodIPs: len(cl.Status.Sandbox.PodIPs) > 0, Annotations: annotations(cl.Annotations),
	}
}

func viewPool(p *extv1beta1.SandboxWarmPool) poolView {
	return poolView{
		Replicas: p.Status.Replicas, ReadyReplicas: p.Status.ReadyReplicas, Selector: p.Status.Selector,
		ObservedGeneration: p.Status.ObservedGeneration, Conditions: conds(p.Status.Conditions),
	}
}

// compareViews: conditions compare as a set by type; nil and empty are
// the same.
var compareViews = []cmp.Option{cmpopts.EquateEmpty(), cmpopts.SortSlices(func(a, b cond) bool { return a.Type < b.Type })}

// expectation is one object's expected state, checked until it holds.
type expectation struct {
	what  string
	check func() error
}

// expect is an expectation that the view of the object at key equals
// want; its error is the (-want +got) diff.
func expect[O client.Object, V any](c client.Client, key types.NamespacedName, obj O, view func(O) V, want V) expectation {
	what := fmt.Sprintf("%T %s", obj, key.Name)
	return expectation{what: what, check: func() error {
		if err := c.Get(context.Background(), key, obj); err != nil {
			return err
		}
		if d := cmp.Diff(want, view(obj), compareViews...); d != "" {
			return fmt.Errorf("(-want +got):\n%s", d)
		}
		return nil
	}}
}

func sandboxIs(c client.Client, ns, name string, want sandboxView) expectation {
	return expect(c, types.NamespacedName{Namespace: ns, Name: name}, &sandboxv1beta1.Sandbox{}, viewSandbox, want)
}

func claimIs(c client.Client, ns, name string, want claimView) expectation {
	return expect(c, types.NamespacedName{Namespace: ns, Name: name}, &extv1beta1.SandboxClaim{}, viewClaim, want)
}

func poolIs(c client.Client, ns, name string, want poolView) expectation {
	return expect(c, types.NamespacedName{Namespace: ns, Name: name}, &extv1beta1.SandboxWarmPool{}, viewPool, want)
}

func isGone(c client.Client, ns, name string, obj client.Object) expectation {
	return expectation{what: fmt.Sprintf("%T %s gone", obj, name), check: gone(c, types.NamespacedName{Namespace: ns, Name: name}, obj)}
}

// step is one move of a walk: act, then wait until every expectation holds
// (at once); a timeout prints each failing expectation's diff.
type step struct {
	name string
	act  func(t *testing.T)
	// want is evaluated after act, so it may use names act learned.
	want func() []expectation
}

func walk(t *testing.T, timeout time.Duration, steps []step) {
	t.Helper()
	for i, s := range steps {
		start := time.Now()
		if s.act != nil {
			s.act(t)
		}
		want := s.want()
		waitFor(t, timeout, fmt.Sprintf("step %d (%s)", i+1, s.name), func() error {
			var errs []error
			for _, e := range want {
				if err := e.check(); err != nil {
					errs = append(errs, fmt.Errorf("%s: %w", e.what, err))
				}
			}
			return errors.Join(errs...)
		})
		t.Logf("step %d (%s): %s", i+1, s.name, time.Since(start).Round(time.Millisecond))
	}
}

// nameHash is upstream's NameHash: FNV-1a 32 of the name, 8 hex digits.
func nameHash(name string) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(name))
	return fmt.Sprintf("%08x", h.Sum32())
}

// update reads obj at key, mutates it and writes it back, retrying on
// conflicts with the controller's writes.
func update[O client.Object](t *testing.T, c client.Client, key types.NamespacedName, obj O, mutate func(O)) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := c.Get(context.Background(), key, obj); err != nil {
			return err
		}
		mutate(obj)
		return c.Update(context.Background(), obj)
	})
	if err != nil {
		t.Fatalf("updating %T %s: %v", obj, key.Name, err)
	}
}

// updateStatus is update on the status subresource.
func updateStatus[O client.Object](t *testing.T, c client.Client, key types.NamespacedName, obj O, mutate func(O)) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := c.Get(context.Background(), key, obj); err != nil {
			return err
		}
		mutate(obj)
		return c.Status().Update(context.Background(), obj)
	})
	if err != nil {
		t.Fatalf("updating the status of %T %s: %v", obj, key.Name, err)
	}
}

func create(t *testing.T, c client.Client, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := c.Create(context.Background(), o); err != nil {
			t.Fatalf("creating %T %s: %v", o, o.GetName(), err)
		}
	}
}

// holdFinalizer keeps a Pod the walk holds in Terminating.
const holdFinalizer = "e2e.agents.x-k8s.io/hold"

func setFinalizer(t *testing.T, c client.Client, key types.NamespacedName, hold bool) {
	t.Helper()
	update(t, c, key, &corev1.Pod{}, func(p *corev1.Pod) {
		p.Finalizers = slices.DeleteFunc(p.Finalizers, func(f string) bool { return f == holdFinalizer })
		if hold {
			p.Finalizers = append(p.Finalizers, holdFinalizer)
		}
	})
}

// releaseOnCleanup removes the walk's finalizer from the Pod at key, should
// a failed walk leave it there.
func releaseOnCleanup(t *testing.T, c client.Client, key types.NamespacedName) {
	t.Cleanup(func() {
		p := &corev1.Pod{}
		if err := c.Get(context.Background(), key, p); err != nil || !slices.Contains(p.Finalizers, holdFinalizer) {
			return
		}
		p.Finalizers = slices.DeleteFunc(p.Finalizers, func(f string) bool { return f == holdFinalizer })
		_ = c.Update(context.Background(), p)
	})
}

// foreignPod is a Pod named like the Sandbox and carrying its name-hash
// label, controlled by nothing.
func foreignPod(ns, name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{sandboxv1beta1.LabelSandboxNameHash: nameHash(name)}},
		Spec: corev1.PodSpec{
			RuntimeClassName:             ptr.To("gvisor"),
			AutomountServiceAccountToken: ptr.To(false),
			Containers:                   []corev1.Container{{Name: "agent", Image: "python:3.13-slim"}},
		},
	}
}

func deleteObject(t *testing.T, c client.Client, o client.Object) {
	t.Helper()
	if err := c.Delete(context.Background(), o); err != nil {
		t.Fatalf("deleting %T %s: %v", o, o.GetName(), err)
	}
}

// boundSandbox waits until the claim names a Sandbox and returns its name.
func boundSandbox(t *testing.T, c client.Client, ns, claim string) string {
	t.Helper()
	name := ""
	waitFor(t, time.Minute, "claim "+claim+" bound", func() error {
		cl := &extv1beta1.SandboxClaim{}
		if err := c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: claim}, cl); err != nil {
			return err
		}
		if name = cl.Status.Sandbox.Name; name == "" {
			return fmt.Errorf("claim %s: status.sandbox is empty; conditions %+v", claim, cl.Status.Conditions)
		}
		return nil
	})
	return name
}

// poolMembers lists the pool's members (name -> template hash label).
func poolMembers(c client.Client, ns, pool string) (map[string]string, error) {
	var list sandboxv1beta1.SandboxList
	if err := c.List(context.Background(), &list, client.InNamespace(ns),
		client.MatchingLabels{sandboxv1beta1.LabelWarmPoolSandbox: nameHash(pool)}); err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, sb := range list.Items {
		if sb.DeletionTimestamp == nil {
			out[sb.Name] = sb.Labels[sandboxv1beta1.LabelSandboxTemplateHash]
		}
	}
	return out, nil
}

// podTerminating expects the Pod at key to exist with a deletion timestamp.
func podTerminating(c client.Client, key types.NamespacedName) expectation {
	return expectation{what: "Pod " + key.Name + " terminating", check: func() error {
		p := &corev1.Pod{}
		if err := c.Get(context.Background(), key, p); err != nil {
			return err
		}
		if p.DeletionTimestamp == nil {
			return fmt.Errorf("not being deleted")
		}
		return nil
	}}
}

// rolled expects none of the old members in the pool any more.
func rolled(c client.Client, ns, pool string, old []string) expectation {
	return expectation{what: "pool " + pool + " rolled", check: func() error {
		now, err := poolMembers(c, ns, pool)
		if err != nil {
			return err
		}
		for _, m := range old {
			if _, ok := now[m]; ok {
				return fmt.Errorf("member %s (of the old template) still there; members %v", m, now)
			}
		}
		return nil
	}}
}
