package preview

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"sigs.k8s.io/yaml"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	"github.com/agentsandbox/reconciler/render"
)

const templateYAML = `
metadata: {name: python-runtime, namespace: team-a}
spec:
  podTemplate:
    spec:
      containers: [{name: python, image: "python:3.13-slim", ports: [{containerPort: 8888}]}]
`

func mustDecode[T any](t *testing.T, s string, into *T) *T {
	t.Helper()
	if err := yaml.UnmarshalStrict([]byte(s), into); err != nil {
		t.Fatal(err)
	}
	return into
}

// found is a Lookup over fixed objects; err, when set, is every answer.
type found struct {
	templates map[string]*extv1beta1.SandboxTemplate
	pools     map[string]*extv1beta1.SandboxWarmPool
	err       error
}

func (f found) Template(ns, name string) (*extv1beta1.SandboxTemplate, error) {
	return f.templates[ns+"/"+name], f.err
}

func (f found) Pool(ns, name string) (*extv1beta1.SandboxWarmPool, error) {
	return f.pools[ns+"/"+name], f.err
}

func fixtures(t *testing.T) (*extv1beta1.SandboxTemplate, *extv1beta1.SandboxWarmPool, found) {
	tpl := mustDecode(t, templateYAML, &extv1beta1.SandboxTemplate{})
	pool := mustDecode(t, `{metadata: {name: python-pool, namespace: team-a}, spec: {replicas: 3, sandboxTemplateRef: {name: python-runtime}}}`, &extv1beta1.SandboxWarmPool{})
	return tpl, pool, found{
		templates: map[string]*extv1beta1.SandboxTemplate{"team-a/python-runtime": tpl},
		pools:     map[string]*extv1beta1.SandboxWarmPool{"team-a/python-pool": pool},
	}
}

func kinds(objs []Object) []string {
	var out []string
	for _, o := range objs {
		out = append(out, o.GVK.Kind)
	}
	return out
}

func podName(t *testing.T, objs []Object) string {
	t.Helper()
	for _, o := range objs {
		if p, ok := o.Object.(*corev1ac.PodApplyConfiguration); ok {
			return *p.Name
		}
	}
	t.Fatalf("no Pod among %v", kinds(objs))
	return ""
}

func TestSandboxIsItsChildrenWithTheDefaults(t *testing.T) {
	sb := &sandboxv1beta1.Sandbox{}
	sb.Spec.PodTemplate.Spec.Containers = []corev1.Container{{Name: "c", Image: "i", Ports: []corev1.ContainerPort{{ContainerPort: 80}}}}
	Fill(sb, "team-a", "box")
	before := sb.DeepCopy()
	p, err := Render(Inputs{Object: sb, Defaults: func(*sandboxv1beta1.Sandbox) render.Defaults {
		return render.Defaults{RuntimeClassName: "gvisor"}
	}})
	if err != nil {
		t.Fatal(err)
	}
	if got := kinds(p.Made); len(got) == 0 || got[0] != "Pod" || len(p.Member) != 0 || p.Missing != nil {
		t.Fatalf("a Sandbox stands for %v, member %v, missing %v; want its Pod first", got, kinds(p.Member), p.Missing)
	}
	pod := p.Made[0].Object.(*corev1ac.PodApplyConfiguration)
	if *pod.Name != "box" || *pod.Namespace != "team-a" || pod.Spec.RuntimeClassName == nil || *pod.Spec.RuntimeClassName != "gvisor" {
		t.Errorf("Pod %s/%s with runtime class %v, want team-a/box with the default gvisor", *pod.Namespace, *pod.Name, pod.Spec.RuntimeClassName)
	}
	if !reflect.DeepEqual(sb, before) {
		t.Error("Render changed its input")
	}
}

func TestTemplateIsItsNetworkPolicyAndAMember(t *testing.T) {
	tpl, _, _ := fixtures(t)
	Fill(tpl, "", "")
	p, err := Render(Inputs{Object: tpl, ControllerNamespace: "agent-sandbox-system"})
	if err != nil {
		t.Fatal(err)
	}
	if got := kinds(p.Made); !reflect.DeepEqual(got, []string{"NetworkPolicy"}) {
		t.Errorf("a template makes %v, want its NetworkPolicy", got)
	}
	if got := podName(t, p.Member); got != "python-runtime" {
		t.Errorf("its member's Pod is %q, want it named after the template", got)
	}
	tpl.Name = "1python"
	if p, err = Render(Inputs{Object: tpl}); err != nil {
		t.Fatal(err)
	}
	if got := podName(t, p.Member); got != "template-member" {
		t.Errorf("a template whose name cannot name a Service: member Pod %q, want template-member", got)
	}
}

func TestPoolMembersArePlannedTheSameEveryTime(t *testing.T) {
	_, pool, lookup := fixtures(t)
	Fill(pool, "", "")
	p, err := Render(Inputs{Object: pool, Lookup: lookup, Members: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := kinds(p.Made); !reflect.DeepEqual(got, []string{"Sandbox", "Sandbox", "Sandbox"}) {
		t.Fatalf("a pool of 3 makes %v", got)
	}
	again, _ := Render(Inputs{Object: pool, Lookup: lookup, Members: true})
	if !reflect.DeepEqual(p, again) {
		t.Error("two previews of the same pool differ")
	}
	first := p.Made[0].Object.(interface{ GetName() *string })
	if got := podName(t, p.Member); got != *first.GetName() || !strings.HasPrefix(got, "python-pool-") {
		t.Errorf("the member judged is %q, want the first planned member %q", got, *first.GetName())
	}
	// Without planning (the webhook), one member named after the template.
	if p, err = Render(Inputs{Object: pool, Lookup: lookup}); err != nil || len(p.Made) != 0 || podName(t, p.Member) != "python-runtime" {
		t.Errorf("unplanned pool: made %v, member %v, err %v", kinds(p.Made), kinds(p.Member), err)
	}
}

func TestWhatIsNotFoundIsMissingAndFailuresAreErrors(t *testing.T) {
	_, pool, lookup := fixtures(t)
	claim := mustDecode(t, `{metadata: {name: c, namespace: team-a}, spec: {warmPoolRef: {name: python-pool}}}`, &extv1beta1.SandboxClaim{})
	Fill(claim, "", "")
	Fill(pool, "", "")
	cases := []struct {
		name   string
		obj    any
		lookup Lookup
		want   *Missing
	}{
		{"pool, no lookup", pool, nil, &Missing{Kind: "SandboxTemplate", Name: "python-runtime"}},
		{"claim, no pool", claim, found{}, &Missing{Kind: "SandboxWarmPool", Name: "python-pool"}},
		{"claim, no template", claim, found{pools: lookup.pools}, &Missing{Kind: "SandboxTemplate", Name: "python-runtime", Pool: "python-pool"}},
	}
	for _, tc := range cases {
		p, err := Render(Inputs{Object: tc.obj, Lookup: tc.lookup})
		if err != nil || !reflect.DeepEqual(p.Missing, tc.want) || len(p.Made)+len(p.Member) != 0 {
			t.Errorf("%s: missing %+v, made %v, err %v; want missing %+v and nothing made", tc.name, p.Missing, kinds(p.Made), err, tc.want)
		}
	}
	broken := errors.New("the cache is down")
	if _, err := Render(Inputs{Object: claim, Lookup: found{err: broken}}); !errors.Is(err, broken) {
		t.Errorf("a lookup that fails: %v, want its error", err)
	}
	if _, err := Render(Inputs{Object: &corev1.Pod{}}); err == nil {
		t.Error("a Pod previewed: no error")
	}
}

func TestClaimIsItsColdSandbox(t *testing.T) {
	_, _, lookup := fixtures(t)
	claim := mustDecode(t, `{metadata: {name: c, namespace: team-a}, spec: {warmPoolRef: {name: python-pool}, env: [{name: A, value: b}]}}`, &extv1beta1.SandboxClaim{})
	Fill(claim, "", "")
	p, err := Render(Inputs{Object: claim, Lookup: lookup})
	var rejected *render.ClaimRejection
	if !errors.As(err, &rejected) {
		t.Fatalf("a claim setting env its template does not allow: %v, want a ClaimRejection", err)
	}
	claim.Spec.Env = nil
	if p, err = Render(Inputs{Object: claim, Lookup: lookup}); err != nil {
		t.Fatal(err)
	}
	if got := kinds(p.Made); !reflect.DeepEqual(got, []string{"Sandbox"}) || podName(t, p.Member) == "" {
		t.Errorf("a claim makes %v and is judged as %v, want its Sandbox and that Sandbox's Pod", got, kinds(p.Member))
	}
}

func TestFillSetsWhatTheAPIServerWould(t *testing.T) {
	sb := &sandboxv1beta1.Sandbox{}
	sb.GenerateName = "box-"
	Fill(sb, "ns", "")
	if sb.Namespace != "ns" || sb.Name != "box-x" || sb.UID != render.PlaceholderUID || sb.Generation != 1 {
		t.Errorf("filled %+v", sb.ObjectMeta)
	}
	sb = &sandboxv1beta1.Sandbox{}
	sb.Namespace, sb.Name, sb.UID, sb.Generation = "mine", "named", "u", 4
	Fill(sb, "ns", "other")
	if sb.Namespace != "mine" || sb.Name != "named" || sb.UID != "u" || sb.Generation != 4 {
		t.Errorf("Fill overwrote what was set: %+v", sb.ObjectMeta)
	}
}
