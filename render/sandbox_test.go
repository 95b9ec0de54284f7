package render

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	sandboxac "github.com/agentsandbox/reconciler/api/v1beta1/applyconfiguration/api/v1beta1"
	"github.com/agentsandbox/reconciler/tests/golden"
)

// sandboxObserved is a golden case's observed.yaml: what the reconciler
// would pass in from the cluster.
type sandboxObserved struct {
	Now *metav1.Time `json:"now,omitempty"`
	// ServiceExists is an owned Service named after the Sandbox; Service
	// gives one (owned or adoptable) explicitly, ForeignService one that
	// may not be taken.
	ServiceExists  bool            `json:"serviceExists,omitempty"`
	Service        *corev1.Service `json:"service,omitempty"`
	ForeignService *corev1.Service `json:"foreignService,omitempty"`
	Expired        bool            `json:"expired,omitempty"`
	ForeignPod     *corev1.Pod     `json:"foreignPod,omitempty"`
	// Pods is the number of Pods the Sandbox controls, when more than one.
	Pods          int    `json:"pods,omitempty"`
	Error         string `json:"error,omitempty"`
	PolicyDenied  string `json:"policyDenied,omitempty"`
	ClusterDomain string `json:"clusterDomain,omitempty"`
	// Pod is the Pod to keep: controlled by the Sandbox, or (Adopt) an
	// unowned one it may adopt.
	Pod   *corev1.Pod `json:"pod,omitempty"`
	Adopt bool        `json:"adopt,omitempty"`
	// PodOwned is what our field manager owns of Pod; absent, the Pod as
	// rendered now (created from this very template), or nothing when it
	// is adopted.
	PodOwned *corev1ac.PodApplyConfiguration `json:"podOwned,omitempty"`
	// PVCs are the existing PVCs of the volume claim templates.
	PVCs []*corev1.PersistentVolumeClaim `json:"pvcs,omitempty"`
	// DefaultRuntimeClass is the controller's default runtime class (the
	// cluster's isolating RuntimeClass); empty: the cluster has none.
	DefaultRuntimeClass string `json:"defaultRuntimeClass,omitempty"`
	// NetworkPolicy is the NetworkPolicy named after the Sandbox, whoever
	// owns it.
	NetworkPolicy *networkingv1.NetworkPolicy `json:"networkPolicy,omitempty"`
	// NamespacePolicy is the NetworkPolicy named
	// agent-sandbox-default-deny in the Sandbox's namespace, whoever owns
	// it (the namespace's UID is goldenNamespaceUID).
	NamespacePolicy *networkingv1.NetworkPolicy `json:"namespacePolicy,omitempty"`
	// TemplateGone: the template the Sandbox was made from is gone.
	TemplateGone bool `json:"templateGone,omitempty"`
}

// goldenControllerNamespace is where the controller and the router run in
// the golden cases.
const goldenControllerNamespace = "agent-sandbox-system"

// goldenNamespaceUID is the UID of the Sandbox's namespace in the golden
// cases.
const goldenNamespaceUID = types.UID("5f0d7c2e-0000-4000-8000-0000000000d0")

// sandboxGolden is what a case's desired.yaml holds.
type sandboxGolden struct {
	Pod                 any   `json:"pod,omitempty"`
	Service             any   `json:"service,omitempty"`
	DeleteService       bool  `json:"deleteService,omitempty"`
	PVCs                []any `json:"pvcs,omitempty"`
	NetworkPolicy       any   `json:"networkPolicy,omitempty"`
	DeleteNetworkPolicy bool  `json:"deleteNetworkPolicy,omitempty"`
}

// LoadSandboxCase reads a golden case's sandbox.yaml, filling the fields the
// API server would (namespace, uid, generation).
func loadSandbox(t *testing.T, c golden.Case) *sandboxv1beta1.Sandbox {
	t.Helper()
	var sb sandboxv1beta1.Sandbox
	if err := yaml.UnmarshalStrict(c.Read(t, "sandbox.yaml"), &sb); err != nil {
		t.Fatalf("%s/sandbox.yaml: %v", c.Name, err)
	}
	if sb.Namespace == "" {
		sb.Namespace = "default"
	}
	if sb.UID == "" {
		sb.UID = types.UID("5f0d7c2e-0000-4000-8000-000000000001")
	}
	if sb.Generation == 0 {
		sb.Generation = 1
	}
	return &sb
}

func loadObserved(t *testing.T, c golden.Case) sandboxObserved {
	t.Helper()
	obs := sandboxObserved{ClusterDomain: "cluster.local"}
	data, err := os.ReadFile(c.Path("observed.yaml"))
	if os.IsNotExist(err) {
		return obs
	} else if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(data, &obs); err != nil {
		t.Fatalf("%s/observed.yaml: %v", c.Name, err)
	}
	return obs
}

func TestSandboxGolden(t *testing.T) {
	cases := golden.Cases(t, "sandbox")
	if len(cases) < 15 {
		t.Errorf("golden/sandbox has %d cases, want at least 15", len(cases))
	}
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			sb := loadSandbox(t, c)
			obs := loadObserved(t, c)
			podName := ""
			if obs.Pod != nil {
				podName = obs.Pod.Name
			}
			desired, err := Sandbox(SandboxInputs{Sandbox: sb, ServiceExists: obs.ServiceExists, PodName: podName, Expired: obs.Expired,
				Defaults: Defaults{RuntimeClassName: obs.DefaultRuntimeClass}, ControllerNamespace: goldenControllerNamespace,
				TemplateGone: obs.TemplateGone, NamespaceUID: goldenNamespaceUID})
			if err != nil {
				t.Fatalf("render: %v", err)
			}
			out := sandboxGolden{DeleteService: desired.DeleteService, DeleteNetworkPolicy: desired.DeleteNetworkPolicy}
			if desired.NetworkPolicy != nil {
				out.NetworkPolicy = desired.NetworkPolicy
			}
			if desired.Pod != nil {
				out.Pod = desired.Pod
			}
			if desired.Service != nil {
				out.Service = desired.Service
			}
			for _, p := range desired.PVCs {
				out.PVCs = append(out.PVCs, p)
			}
			golden.AssertYAML(t, c.Path("desired.yaml"), out)

			in := planInputs(t, sb, obs)
			before := mustYAML(t, in)
			plan, err := PlanSandbox(in)
			if err != nil {
				t.Fatalf("plan: %v", err)
			}
			golden.AssertYAML(t, c.Path("plan.yaml"), plan)
			again, _ := PlanSandbox(in)
			if a, b, after := mustYAML(t, plan), mustYAML(t, again), mustYAML(t, in); a != b || before != after {
				t.Errorf("PlanSandbox is not pure (outputs equal %v; inputs unchanged %v)", a == b, before == after)
			}

			// The status the reconciler reports: the plan's, or the one for
			// the error or denial the case observes.
			status := SandboxStatus(in.statusInputs())
			for _, s := range plan.Steps {
				if s.Action == ActionStatus {
					status = s.Object.(*sandboxac.SandboxApplyConfiguration)
				}
			}
			if obs.Error != "" || obs.PolicyDenied != "" {
				status = SandboxStatusOnFailure(in, obs.Error, obs.PolicyDenied)
			}
			golden.AssertYAML(t, c.Path("status.yaml"), status.Status)
		})
	}
}

func mustYAML(t *testing.T, v any) string {
	t.Helper()
	b, err := yaml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// planInputs are a case's plan inputs, as the reconciler would observe
// them.
func planInputs(t *testing.T, sb *sandboxv1beta1.Sandbox, obs sandboxObserved) SandboxPlanInputs {
	t.Helper()
	now := metav1.NewTime(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC))
	if obs.Now != nil {
		now = *obs.Now
	}
	in := SandboxPlanInputs{
		Sandbox: sb, Pod: obs.Pod, Adopt: obs.Adopt, PodOwned: obs.PodOwned, ForeignPod: obs.ForeignPod,
		Service: obs.Service, ForeignService: obs.ForeignService, PVCs: map[string]*corev1.PersistentVolumeClaim{},
		Expired: obs.Expired, Defaults: Defaults{RuntimeClassName: obs.DefaultRuntimeClass},
		ClusterDomain: obs.ClusterDomain, Now: now,
		NetworkPolicy: obs.NetworkPolicy, NamespacePolicy: obs.NamespacePolicy, NamespaceUID: goldenNamespaceUID,
		ControllerNamespace: goldenControllerNamespace, TemplateGone: obs.TemplateGone,
	}
	if obs.ServiceExists && in.Service == nil {
		in.Service = &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: sb.Name, Namespace: sb.Namespace, UID: "5f0d7c2e-0000-4000-8000-00000000005e",
				OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(sb, sandboxv1beta1.GroupVersion.WithKind("Sandbox"))}},
			Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone},
		}
	}
	for _, p := range obs.PVCs {
		in.PVCs[p.Name] = p
	}
	switch {
	case obs.Pods > 1:
		in.Pod = nil // none is chosen
		for i := range obs.Pods {
			p := &corev1.Pod{}
			if obs.Pod != nil {
				p = obs.Pod.DeepCopy()
			}
			p.Name = fmt.Sprintf("%s-%d", sb.Name, i)
			in.Pods = append(in.Pods, p)
		}
	case obs.Pod != nil && !obs.Adopt:
		in.Pods = []*corev1.Pod{obs.Pod}
	}
	if in.Pod != nil && !in.Adopt && in.PodOwned == nil {
		// Created by us from this template: we own its rendered spec.
		d, err := Sandbox(SandboxInputs{Sandbox: sb, ServiceExists: in.Service != nil, PodName: in.Pod.Name,
			Defaults: Defaults{RuntimeClassName: ptr.Deref(in.Pod.Spec.RuntimeClassName, "")}})
		if err != nil {
			t.Fatal(err)
		}
		if d.Pod != nil {
			in.PodOwned = &corev1ac.PodApplyConfiguration{Spec: d.Pod.Spec}
		}
	}
	return in
}

// TestSandboxPure renders the same inputs twice and checks the outputs are
// equal and the inputs untouched.
func TestSandboxPure(t *testing.T) {
	for _, c := range golden.Cases(t, "sandbox") {
		sb := loadSandbox(t, c)
		before, _ := yaml.Marshal(sb)
		d := Defaults{RuntimeClassName: "gvisor"}
		a, errA := Sandbox(SandboxInputs{Sandbox: sb, ServiceExists: true, Defaults: d})
		b, errB := Sandbox(SandboxInputs{Sandbox: sb, ServiceExists: true, Defaults: d})
		ya, _ := yaml.Marshal(a)
		yb, _ := yaml.Marshal(b)
		after, _ := yaml.Marshal(sb)
		if errA != nil || errB != nil || string(ya) != string(yb) || string(before) != string(after) {
			t.Errorf("%s: render is not pure (errors %v, %v; outputs equal %v; input unchanged %v)",
				c.Name, errA, errB, string(ya) == string(yb), string(before) == string(after))
		}
	}
}

// A name that cannot become a child's name is refused by render, before
// anything is created, with the fix in the message.
func TestSandboxRefusesInvalidChildNames(t *testing.T) {
	base := func(name string) *sandboxv1beta1.Sandbox {
		sb := &sandboxv1beta1.Sandbox{}
		sb.Name, sb.Namespace, sb.UID = name, "ns", "u"
		sb.Spec.PodTemplate.Spec.Containers = []corev1.Container{{Name: "main", Image: "busybox"}}
		return sb
	}
	long := strings.Repeat("a", 64)
	withService := func(sb *sandboxv1beta1.Sandbox) *sandboxv1beta1.Sandbox { sb.Spec.Service = ptr.To(true); return sb }
	withVCT := func(sb *sandboxv1beta1.Sandbox, name string) *sandboxv1beta1.Sandbox {
		sb.Spec.VolumeClaimTemplates = []sandboxv1beta1.PersistentVolumeClaimTemplate{{EmbeddedObjectMetadata: sandboxv1beta1.EmbeddedObjectMetadata{Name: name}}}
		return sb
	}
	cases := []struct {
		name string
		sb   *sandboxv1beta1.Sandbox
		want string // "" = renders
	}{
		{"63 chars with a Service", withService(base(long[:63])), ""},
		{"64 chars with a Service", withService(base(long)), "no more than 63 characters"},
		{"64 chars without a Service", base(long), ""},
		{"dotted name with a Service", withService(base("my.box")), "set spec.service to false"},
		{"dotted name without a Service", base("my.box"), ""},
		{"PVC name over 253", withVCT(base(long), strings.Repeat("d", 200)), "no more than 253 characters"},
		{"PVC name at 253", withVCT(base(long), strings.Repeat("d", 253-65)), ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Sandbox(SandboxInputs{Sandbox: tc.sb})
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error %v, want one mentioning %q", err, tc.want)
			}
		})
	}
}

// The default runtime class reaches the Pod of a Sandbox whose template
// names none, and only the Pod: an explicit class is kept, no default
// leaves the class unset, and the Sandbox is never changed.
func TestSandboxDefaultRuntimeClass(t *testing.T) {
	plain := func(class *string) *sandboxv1beta1.Sandbox {
		sb := &sandboxv1beta1.Sandbox{}
		sb.Name, sb.Namespace, sb.UID = "box", "ns", "u"
		sb.Spec.PodTemplate.Spec = corev1.PodSpec{RuntimeClassName: class, Containers: []corev1.Container{{Name: "main", Image: "busybox"}}}
		return sb
	}
	cases := []struct {
		name     string
		sb       *sandboxv1beta1.Sandbox
		defaults Defaults
		want     *string
	}{
		{"no class, default gvisor", plain(nil), Defaults{RuntimeClassName: "gvisor"}, ptr.To("gvisor")},
		{"no class, no default", plain(nil), Defaults{}, nil},
		{"explicit class kept", plain(ptr.To("kata")), Defaults{RuntimeClassName: "gvisor"}, ptr.To("kata")},
		{"explicit class outside the allowlist kept", plain(ptr.To("runc")), Defaults{RuntimeClassName: "gvisor"}, ptr.To("runc")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := tc.sb.DeepCopy()
			desired, err := Sandbox(SandboxInputs{Sandbox: tc.sb, Defaults: tc.defaults})
			if err != nil {
				t.Fatal(err)
			}
			if got := desired.Pod.Spec.RuntimeClassName; !ptr.Equal(got, tc.want) {
				t.Errorf("Pod runtimeClassName %v, want %v", ptr.Deref(got, "(unset)"), ptr.Deref(tc.want, "(unset)"))
			}
			if !equality.Semantic.DeepEqual(before, tc.sb) {
				t.Errorf("the Sandbox was changed: %+v", tc.sb.Spec.PodTemplate.Spec)
			}
		})
	}
	// A Defaults value is its own, fixed source; no source gives none.
	if CurrentDefaults(Defaults{RuntimeClassName: "kata"}).RuntimeClassName != "kata" || CurrentDefaults(nil) != (Defaults{}) {
		t.Error("CurrentDefaults")
	}
}
