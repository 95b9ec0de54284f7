package render

import (
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	"github.com/agentsandbox/reconciler/tests/golden"
)

var goldenNow = metav1.NewTime(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC))

// readObject reads a case file into obj, filling what the API server
// would (namespace, uid, generation). A missing optional file leaves obj
// untouched and returns false.
func readObject(t *testing.T, c golden.Case, file string, obj metav1.Object, optional bool) bool {
	t.Helper()
	data, err := os.ReadFile(c.Path(file))
	if os.IsNotExist(err) && optional {
		return false
	} else if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(data, obj); err != nil {
		t.Fatalf("%s/%s: %v", c.Name, file, err)
	}
	if obj.GetNamespace() == "" {
		obj.SetNamespace("default")
	}
	if obj.GetUID() == "" {
		obj.SetUID(types.UID("5f0d7c2e-0000-4000-8000-" + file[:len(file)-len(".yaml")]))
	}
	if obj.GetGeneration() == 0 {
		obj.SetGeneration(1)
	}
	return true
}

// templateObserved is a template case's observed.yaml.
type templateObserved struct {
	// NetworkPolicy is the NetworkPolicy of the template's policy name;
	// Owned makes the template its controller.
	NetworkPolicy *networkingv1.NetworkPolicy `json:"networkPolicy,omitempty"`
	Owned         bool                        `json:"owned,omitempty"`
	// MembersDenied and NetworkPolicyDenied are the policies' denials of
	// the first plan's checks: the case shows the plan made again.
	MembersDenied       string `json:"membersDenied,omitempty"`
	NetworkPolicyDenied string `json:"networkPolicyDenied,omitempty"`
	Reported            string `json:"reported,omitempty"`
	// LegacyPods: Pods of the template's Sandboxes lack the
	// sandbox-template-ref-sha256 label.
	LegacyPods bool `json:"legacyPods,omitempty"`
}

func TestTemplateGolden(t *testing.T) {
	cases := golden.Cases(t, "template")
	if len(cases) < 4 {
		t.Errorf("golden/template has %d cases, want at least 4", len(cases))
	}
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			var tmpl extv1beta1.SandboxTemplate
			readObject(t, c, "template.yaml", &tmpl, false)
			d, err := Template(TemplateInputs{Template: &tmpl, ControllerNamespace: "agent-sandbox-system"})
			if err != nil {
				t.Fatalf("render: %v", err)
			}
			golden.AssertYAML(t, c.Path("desired.yaml"), map[string]any{
				"networkPolicy":       d.NetworkPolicy,
				"deleteNetworkPolicy": d.DeleteNetworkPolicy,
				"templateLabels":      d.Labels,
			})

			var obs templateObserved
			if data, err := os.ReadFile(c.Path("observed.yaml")); err == nil {
				if err := yaml.UnmarshalStrict(data, &obs); err != nil {
					t.Fatalf("observed.yaml: %v", err)
				}
			}
			if np := obs.NetworkPolicy; np != nil {
				np.Namespace = tmpl.Namespace
				if obs.Owned {
					np.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(&tmpl, extv1beta1.GroupVersion.WithKind("SandboxTemplate"))}
				}
			}
			in := TemplatePlanInputs{
				TemplateInputs: TemplateInputs{Template: &tmpl, ControllerNamespace: "agent-sandbox-system", LegacyPods: obs.LegacyPods},
				NetworkPolicy:  obs.NetworkPolicy, Policies: true,
				MembersDenied: obs.MembersDenied, NetworkPolicyDenied: obs.NetworkPolicyDenied, Reported: obs.Reported,
			}
			plan, refused := PlanTemplate(in)
			golden.AssertYAML(t, c.Path("plan.yaml"), map[string]any{"plan": plan, "refused": refused})
		})
	}
}

// claimObserved is a claim case's observed.yaml.
type claimObserved struct {
	// Member is a warm member to adopt: desired.yaml then holds the
	// adoption's apply configuration instead of a cold Sandbox.
	Member *sandboxv1beta1.Sandbox `json:"member,omitempty"`
	// Sandbox is the bound Sandbox as observed, for status.
	Sandbox        *sandboxv1beta1.Sandbox `json:"sandbox,omitempty"`
	SandboxName    string                  `json:"sandboxName,omitempty"`
	Pending        bool                    `json:"pending,omitempty"`
	Expired        bool                    `json:"expired,omitempty"`
	ExpiredMessage string                  `json:"expiredMessage,omitempty"`
	Now            *metav1.Time            `json:"now,omitempty"`
	// Candidates are the members the pool's queue offers (member, when
	// set, is offered too, first); Removing names those the pool is
	// about to delete. NoPool and NoTemplate plan as if the pool or the
	// template did not exist; Policies lists the plan's checks.
	Candidates []*sandboxv1beta1.Sandbox `json:"candidates,omitempty"`
	Removing   []string                  `json:"removing,omitempty"`
	NoPool     bool                      `json:"noPool,omitempty"`
	NoTemplate bool                      `json:"noTemplate,omitempty"`
	Policies   bool                      `json:"policies,omitempty"`
	// RefusedReason: the API server refused the adoption of member for
	// this reason.
	RefusedReason string `json:"refusedReason,omitempty"`
	// Others are the other Sandboxes the claim controls besides the bound
	// one (sandbox); Holding names one this process bound it to moments
	// ago.
	Others  []*sandboxv1beta1.Sandbox `json:"others,omitempty"`
	Holding string                    `json:"holding,omitempty"`
	// BoundElsewhere: the binding's commit met a conflict, and the claim,
	// read again, names this Sandbox: another controller bound it first.
	BoundElsewhere string `json:"boundElsewhere,omitempty"`
}

func TestClaimGolden(t *testing.T) {
	cases := golden.Cases(t, "claim")
	if len(cases) < 8 {
		t.Errorf("golden/claim has %d cases, want at least 8", len(cases))
	}
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			var claim extv1beta1.SandboxClaim
			readObject(t, c, "claim.yaml", &claim, false)
			var tmpl extv1beta1.SandboxTemplate
			readObject(t, c, "template.yaml", &tmpl, false)
			var obs claimObserved
			if data, err := os.ReadFile(c.Path("observed.yaml")); err == nil {
				if err := yaml.UnmarshalStrict(data, &obs); err != nil {
					t.Fatalf("observed.yaml: %v", err)
				}
			}
			out := map[string]any{"coldStart": NeedsColdStart(&claim)}
			rej := ValidateClaim(&claim, &tmpl)
			if rej != nil {
				out["rejection"] = rej
			}
			switch {
			case obs.Member != nil:
				ac, err := Adoption(&claim, &tmpl, obs.Member, goldenFieldManager)
				if err != nil {
					t.Fatalf("adoption: %v", err)
				}
				out["adoption"] = ac
			case rej == nil:
				sb, err := ClaimSandbox(ClaimInputs{Claim: &claim, Template: &tmpl})
				if err != nil {
					t.Fatalf("render: %v", err)
				}
				out["sandbox"] = sb
			}
			golden.AssertYAML(t, c.Path("desired.yaml"), out)

			now := goldenNow
			if obs.Now != nil {
				now = *obs.Now
			}
			status := ClaimStatus(ClaimStatusInputs{
				Claim: &claim, SandboxName: obs.SandboxName, Sandbox: obs.Sandbox, Pending: obs.Pending,
				Rejection: rej, Expired: obs.Expired, ExpiredMessage: obs.ExpiredMessage, Now: now,
			})
			golden.AssertYAML(t, c.Path("status.yaml"), status.Status)
			assertClaimPlan(t, c, &claim, &tmpl, obs, rej, now, status)
		})
	}
}

func TestMemberNames(t *testing.T) {
	// As the API server names an object created with generateName
	// "<pool>-": the base cut to 58 characters, then 5 of the alphabet.
	if n := MemberName("p", "b2z9x"); n != "p-b2z9x" {
		t.Errorf("MemberName = %s, want p-b2z9x", n)
	}
	long := strings.Repeat("a", 80)
	if n := MemberName(long, "bbbbb"); n != strings.Repeat("a", 58)+"bbbbb" {
		t.Errorf("member of a long pool name = %s (%d characters), want 58 of the base and the suffix", n, len(n))
	}
	if n := MemberName(strings.Repeat("a", 57), "bbbbb"); n != strings.Repeat("a", 57)+"-bbbbb" || len(n) != 63 {
		t.Errorf("member of a 57-character pool name = %s", n)
	}
	seq := SeededSuffixes("u1")
	seen := map[string]bool{}
	for i := 0; i < 1000; i++ {
		s := seq(i)
		if s != seq(i) {
			t.Fatalf("SeededSuffixes(%d) is not deterministic", i)
		}
		if len(s) != MemberSuffixLength || strings.Trim(s, MemberSuffixAlphabet) != "" {
			t.Fatalf("suffix %q is not %d characters of %s", s, MemberSuffixLength, MemberSuffixAlphabet)
		}
		seen[s] = true
	}
	if len(seen) < 990 {
		t.Errorf("1000 suffixes gave only %d distinct ones", len(seen))
	}
}

func TestTemplateHashIgnoresMetadata(t *testing.T) {
	a := sandboxv1beta1.SandboxSpec{}
	a.PodTemplate.Spec.Containers = append(a.PodTemplate.Spec.Containers, corev1.Container{Name: "main", Image: "busybox"})
	b := *a.DeepCopy()
	b.PodTemplate.ObjectMeta.Labels = map[string]string{"team": "x"}
	b.PodTemplate.ObjectMeta.Annotations = map[string]string{"note": "y"}
	if TemplateHash(&a) != TemplateHash(&b) {
		t.Error("a metadata-only edit changed the template hash")
	}
	c := *a.DeepCopy()
	c.PodTemplate.Spec.Containers[0].Image = "busybox:2"
	if TemplateHash(&a) == TemplateHash(&c) {
		t.Error("an image change left the template hash unchanged")
	}
}

// Sandboxes made from a template mirror it, as upstream's do: a template
// without a runtime class makes Sandboxes without one (their Pods get the
// default when rendered), so the pool's template hash does not depend on
// the cluster's RuntimeClasses.
func TestTemplateSandboxesMirrorTheRuntimeClass(t *testing.T) {
	tmpl := &extv1beta1.SandboxTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "tpl", UID: "t"}}
	tmpl.Spec.PodTemplate.Spec = corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "busybox"}}}
	pool := &extv1beta1.SandboxWarmPool{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "pool", UID: "p"}}
	claim := &extv1beta1.SandboxClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "claim", UID: "c"}}
	member, err := WarmPoolMember(WarmPoolInputs{Pool: pool, Template: tmpl}, "pool-x")
	if err != nil {
		t.Fatal(err)
	}
	cold, err := ClaimSandbox(ClaimInputs{Claim: claim, Template: tmpl})
	if err != nil {
		t.Fatal(err)
	}
	for name, rc := range map[string]*string{
		"TemplateSpec":  TemplateSpec(tmpl).PodTemplate.Spec.RuntimeClassName,
		"TemplateProbe": TemplateProbe(tmpl).Spec.PodTemplate.Spec.RuntimeClassName,
		"pool member":   member.Spec.PodTemplate.Spec.RuntimeClassName,
		"cold claim":    cold.Spec.PodTemplate.Spec.RuntimeClassName,
	} {
		if rc != nil {
			t.Errorf("%s: runtimeClassName %q, want it unset like the template's", name, *rc)
		}
	}
	probe := TemplateProbe(tmpl)
	probe.UID = "u"
	desired, err := Sandbox(SandboxInputs{Sandbox: probe, Defaults: Defaults{RuntimeClassName: "kata"}})
	if err != nil {
		t.Fatal(err)
	}
	if rc := desired.Pod.Spec.RuntimeClassName; rc == nil || *rc != "kata" {
		t.Errorf("the template's Pod: runtimeClassName %v, want the default kata", rc)
	}
}
