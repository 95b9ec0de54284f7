package policy

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// probePolicies read, between them, a name, a label's value through an
// objectSelector, label keys only, an annotation's value, a field's
// presence and a list: each of which the memo must tell apart.
const probePolicies = `
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: probe}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], resources: [pods], operations: [CREATE, UPDATE]}
  variables:
  - name: notes
    expression: "has(object.metadata.annotations) ? object.metadata.annotations : {}"
  validations:
  - expression: "!object.metadata.name.startsWith('evil')"
    message: no evil names
  - expression: "!(has(object.metadata.labels) && object.metadata.labels.exists(k, k == 'banned'))"
    message: no banned label key
  - expression: "!('note' in variables.notes) || variables.notes['note'] == 'ok'"
    messageExpression: "'note is ' + variables.notes['note']"
  - expression: "!has(object.spec.hostNetwork)"
    message: hostNetwork set at all
  - expression: "object.spec.containers.all(c, c.image != 'bad')"
    message: bad image
  - expression: "oldObject == null || !has(oldObject.spec.nodeName) || oldObject.spec.nodeName != 'locked'"
    message: locked node
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: probe}
spec:
  policyName: probe
  validationActions: [Deny]
  matchResources:
    objectSelector:
      matchExpressions:
      - {key: tier, operator: In, values: [judged]}
      - {key: present, operator: Exists}
`

func probeSet(t *testing.T) *Set {
	t.Helper()
	s, err := Load(Source{Name: "probe.yaml", Data: []byte(probePolicies)})
	if err != nil {
		t.Fatal(err)
	}
	if s.memo == nil {
		t.Fatal("the probe policies were judged to read whole objects")
	}
	return s
}

// The memo plays the attacker's game: each object below differs from the
// one judged before it in one thing; whatever the policies read must get
// its own decisions (as a set without a memo gives them), and only what
// they do not read may be answered from memory.
func TestMemoAgreesWithEvaluation(t *testing.T) {
	base := func(mutate ...func(*corev1.Pod)) *corev1.Pod {
		p := &corev1.Pod{
			TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
			ObjectMeta: metav1.ObjectMeta{Name: "box-1", Namespace: "team-a", UID: "u1",
				Labels: map[string]string{"tier": "judged", "present": "x", "hash": "aaaa"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "agent", Image: "python"}}},
		}
		for _, m := range mutate {
			m(p)
		}
		return p
	}
	cases := []struct {
		name string
		pod  *corev1.Pod
		old  *corev1.Pod
		// hit: answered from memory (it differs only in what is not read).
		hit bool
	}{
		{name: "first", pod: base()},
		{name: "another uid, label value, owner, status", hit: true, pod: base(func(p *corev1.Pod) {
			p.UID, p.Labels["hash"] = "u2", "bbbb"
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "X", Name: "o", UID: types.UID("o1")}}
			p.Status.Phase = corev1.PodRunning
		})},
		{name: "evil name", pod: base(func(p *corev1.Pod) { p.Name = "evil-1" })},
		{name: "selector value out", pod: base(func(p *corev1.Pod) { p.Labels["tier"] = "other"; p.Name = "evil-1" })},
		{name: "selector key gone", pod: base(func(p *corev1.Pod) { delete(p.Labels, "present"); p.Name = "evil-1" })},
		{name: "banned label key", pod: base(func(p *corev1.Pod) { p.Labels["banned"] = "" })},
		{name: "banned label key, another value", hit: true, pod: base(func(p *corev1.Pod) { p.Labels["banned"] = "yes" })},
		{name: "annotation bad", pod: base(func(p *corev1.Pod) { p.Annotations = map[string]string{"note": "bad"} })},
		{name: "annotation worse", pod: base(func(p *corev1.Pod) { p.Annotations = map[string]string{"note": "worse"} })},
		{name: "hostNetwork set", pod: base(func(p *corev1.Pod) { p.Spec.HostNetwork = true })},
		{name: "bad image", pod: base(func(p *corev1.Pod) { p.Spec.Containers[0].Image = "bad" })},
		{name: "second container", pod: base(func(p *corev1.Pod) {
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "side", Image: "bad"})
		})},
		{name: "update from a locked node", pod: base(), old: base(func(p *corev1.Pod) { p.Spec.NodeName = "locked" })},
		{name: "update from another node", pod: base(), old: base(func(p *corev1.Pod) { p.Spec.NodeName = "free" })},
		{name: "update from another node again", hit: true, pod: base(), old: base(func(p *corev1.Pod) { p.Spec.NodeName = "free"; p.UID = "u9" })},
	}
	remembering := probeSet(t)
	ctx := context.Background()
	for _, c := range cases {
		o, err := ObjectOf(c.pod)
		if err != nil {
			t.Fatal(err)
		}
		if c.old != nil {
			old, err := ObjectOf(c.old)
			if err != nil {
				t.Fatal(err)
			}
			o.OldObject, o.Operation = old.Object, "UPDATE"
		}
		fresh := probeSet(t)
		fresh.memo = nil
		want := fresh.Check(ctx, o)
		hits := remembering.memo.hits.Load()
		got := remembering.Check(ctx, o)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: remembered decisions %v, evaluated %v", c.name, got, want)
		}
		if hit := remembering.memo.hits.Load() > hits; hit != c.hit {
			t.Errorf("%s: answered from memory = %v, want %v", c.name, hit, c.hit)
		}
	}
}

// Reads are found as the API server's CEL sees them, and whatever the
// analysis cannot follow reads everything.
func TestReadsOf(t *testing.T) {
	pod := map[string]any{
		"metadata": map[string]any{"name": "n", "labels": map[string]any{"a": "1", "b": "2"}, "uid": "u"},
		"spec":     map[string]any{"containers": []any{map[string]any{"name": "c"}}, "hostPID": true, "nodeName": "x"},
	}
	cases := []struct {
		expr string
		// want is the projection of pod; nil: the whole object is read.
		want any
	}{
		{"object.spec.hostPID", map[string]any{"spec": map[string]any{"hostPID": true}}},
		{"has(object.spec.hostPID)", map[string]any{"spec": map[string]any{"hostPID": "bool"}}},
		{"has(object.spec.missing)", map[string]any{"spec": map[string]any{}}},
		{"object.metadata.labels.all(k, k != 'z')", map[string]any{"metadata": map[string]any{"labels": map[string]any{"a": "string", "b": "string"}}}},
		{"object.spec.containers.all(c, c.name != '')", map[string]any{"spec": map[string]any{"containers": []any{map[string]any{"name": "c"}}}}},
		{"object.metadata.labels.all(k, v, v != 'z')", map[string]any{"metadata": map[string]any{"labels": map[string]any{"a": "1", "b": "2"}}}},
		{"object.metadata.labels['a'] == '1'", map[string]any{"metadata": map[string]any{"labels": map[string]any{"a": "1", "b": "2"}}}},
		{"object.?spec.orValue({}) != {}", nil},
		{"object == oldObject", nil},
		{"size(object) > 0", nil},
		{"variables.x.all(object, object.spec.nodeName == '')", map[string]any{"spec": map[string]any{"nodeName": "x"}}},
		{"request.name == 'n'", map[string]any{}},
		{"authorizer.requestResource.check('get').allowed()", map[string]any{}},
		{"this is not CEL (", nil},
	}
	for _, c := range cases {
		policy := &compiled{policy: vapWith(c.expr)}
		r := readsOf([]*compiled{policy})
		if c.want == nil {
			if !r.all {
				t.Errorf("%s: reads %v, want everything", c.expr, r.project(pod))
			}
			continue
		}
		if r.all {
			t.Errorf("%s: reads everything, want %v", c.expr, c.want)
			continue
		}
		if got := r.project(pod); fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("%s: projection %v, want %v", c.expr, got, c.want)
		}
		if names := strings.Contains(c.expr, "request") || strings.Contains(c.expr, "authorizer"); r.name != names {
			t.Errorf("%s: reads the name = %v, want %v", c.expr, r.name, names)
		}
	}
}

// Sandbox Pods alike but for their names, owners and label values are
// judged once by the built-in bundles; a Pod that differs in what they
// read is judged again, and denied as it should be.
func TestBuiltInBundlesRememberAlikePods(t *testing.T) {
	set := loadBundles(t, BundleRuntimeIsolation, BundleBaseline, BundleRestricted)
	if set.memo == nil {
		t.Fatal("the built-in bundles were judged to read whole objects")
	}
	ctx := context.Background()
	for i := range 5 {
		pod := sandboxPod(func(p *corev1.Pod) {
			p.Name, p.UID = fmt.Sprintf("box-%d", i), types.UID(fmt.Sprintf("uid-%d", i))
			p.Labels["agents.x-k8s.io/sandbox-name-hash"] = fmt.Sprintf("%08x", i)
			p.Labels["agents.x-k8s.io/claim-uid"] = fmt.Sprintf("claim-%d", i)
		})
		if ds, err := set.CheckAll(ctx, pod); err != nil || len(ds) != 0 {
			t.Fatalf("pod %d: %v %v", i, ds, err)
		}
	}
	if hits, misses := set.memo.hits.Load(), set.memo.misses.Load(); hits != 4 || misses != 1 {
		t.Errorf("hits %d, misses %d; want 4 and 1", hits, misses)
	}
	denied := sandboxPod(func(p *corev1.Pod) { p.Name = "box-9"; p.Spec.RuntimeClassName = ptr.To("runc") })
	ds, err := set.CheckAll(ctx, denied)
	if err != nil || len(Denied(ds)) == 0 {
		t.Fatalf("a Pod under runc: %v %v", ds, err)
	}
	if ds[0].Object != "Pod default/box-9" {
		t.Errorf("decision names %q", ds[0].Object)
	}
	unlabelled := sandboxPod(func(p *corev1.Pod) { p.Name = "plain"; p.Labels = nil; p.Spec.RuntimeClassName = ptr.To("runc") })
	if ds, err := set.CheckAll(ctx, unlabelled); err != nil || len(ds) != 0 {
		t.Errorf("a Pod outside sandboxes: %v %v", ds, err)
	}
}

// vapWith is a policy on Pods with one validation.
func vapWith(expr string) *admissionregistrationv1.ValidatingAdmissionPolicy {
	return &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "p"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			Validations: []admissionregistrationv1.Validation{{Expression: expr}},
		},
	}
}
