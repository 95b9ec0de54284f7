package render

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
)

// The fuzz targets feed render whatever YAML the fuzzer makes of the golden
// inputs: every render and status function must return (a result or an
// error) without panicking, and quickly. `make fuzz` runs them with
// -fuzz; plain `go test` runs the seeds.

// renderBound is far above any real render (microseconds); a slower call
// means something loops on hostile input.
const renderBound = 2 * time.Second

// goldenFiles lists the golden files matching pattern (relative to golden/).
func goldenFiles(f *testing.F, pattern string) []string {
	f.Helper()
	files, err := filepath.Glob(filepath.Join("..", "golden", pattern))
	if err != nil || len(files) == 0 {
		f.Fatalf("no golden seeds for %s (%v)", pattern, err)
	}
	return files
}

func read(f *testing.F, path string) []byte {
	f.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		f.Fatal(err)
	}
	return b
}

// readSibling reads name next to path, or returns nil.
func readSibling(path, name string) []byte {
	b, _ := os.ReadFile(filepath.Join(filepath.Dir(path), name))
	return b
}

// bounded runs fn and fails if it has not returned within renderBound, so
// that the fuzzer records an input that hangs instead of stalling on it.
func bounded(t *testing.T, what string, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); fn() }()
	select {
	case <-done:
	case <-time.After(renderBound):
		t.Fatalf("%s did not return within %s on this input", what, renderBound)
	}
}

// decode unmarshals data into obj and gives it the identity the
// controller always has (name, namespace, UID), so that render sees what
// it would in the cluster.
func decode(data []byte, obj metav1.Object) bool {
	if err := yaml.Unmarshal(data, obj); err != nil {
		return false
	}
	if obj.GetName() == "" {
		obj.SetName("fuzz")
	}
	if obj.GetNamespace() == "" {
		obj.SetNamespace("default")
	}
	if obj.GetUID() == "" {
		obj.SetUID("5f0d7c2e-0000-4000-8000-000000000000")
	}
	return true
}

var fuzzNow = metav1.NewTime(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC))

func FuzzSandbox(f *testing.F) {
	for _, p := range goldenFiles(f, "sandbox/*/sandbox.yaml") {
		f.Add(read(f, p), true, "")
	}
	f.Fuzz(func(t *testing.T, data []byte, serviceExists bool, podName string) {
		sb := &sandboxv1beta1.Sandbox{}
		if !decode(data, sb) {
			return
		}
		bounded(t, "Sandbox", func() {
			_, _ = Sandbox(SandboxInputs{Sandbox: sb, ServiceExists: serviceExists, PodName: podName})
			_ = SandboxStatus(SandboxStatusInputs{Sandbox: sb, Service: serviceExists, Now: fuzzNow})
			_, _ = PlanSandbox(SandboxPlanInputs{Sandbox: sb, Now: fuzzNow})
		})
	})
}

func FuzzTemplate(f *testing.F) {
	for _, p := range goldenFiles(f, "template/*/template.yaml") {
		f.Add(read(f, p))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		tmpl := &extv1beta1.SandboxTemplate{}
		if !decode(data, tmpl) {
			return
		}
		bounded(t, "Template", func() {
			_, _ = Template(TemplateInputs{Template: tmpl, ControllerNamespace: "agent-sandbox-system"})
			_, _ = PlanTemplate(TemplatePlanInputs{TemplateInputs: TemplateInputs{Template: tmpl, ControllerNamespace: "agent-sandbox-system"}, Policies: true})
		})
	})
}

func FuzzWarmPool(f *testing.F) {
	for _, p := range goldenFiles(f, "warmpool/*/pool.yaml") {
		f.Add(read(f, p), readSibling(p, "template.yaml"), uint16(3))
	}
	f.Fuzz(func(t *testing.T, poolData, tmplData []byte, maxBatch uint16) {
		pool := &extv1beta1.SandboxWarmPool{}
		tmpl := &extv1beta1.SandboxTemplate{}
		if !decode(poolData, pool) || !decode(tmplData, tmpl) {
			return
		}
		if pool.Spec.Replicas != nil && *pool.Spec.Replicas > 2000 {
			// The CRD caps what the API server admits far lower; the plan
			// is linear in replicas.
			return
		}
		bounded(t, "WarmPool", func() {
			in := WarmPoolInputs{Pool: pool, Template: tmpl}
			_, _ = PlanWarmPool(WarmPoolPlanInputs{WarmPoolInputs: in, Taken: func(string) bool { return false }, Suffix: SeededSuffixes("fuzz"), MaxBatch: int(maxBatch)})
			_, _ = WarmPoolMember(in, pool.Name+"-abcde")
			_ = WarmPoolStatus(WarmPoolStatusInputs{Pool: pool, Grace: time.Minute, Now: fuzzNow})
		})
	})
}

func FuzzClaim(f *testing.F) {
	for _, p := range goldenFiles(f, "claim/*/claim.yaml") {
		f.Add(read(f, p), readSibling(p, "template.yaml"))
	}
	f.Fuzz(func(t *testing.T, claimData, tmplData []byte) {
		claim := &extv1beta1.SandboxClaim{}
		tmpl := &extv1beta1.SandboxTemplate{}
		if !decode(claimData, claim) || !decode(tmplData, tmpl) {
			return
		}
		bounded(t, "Claim", func() {
			rej := ValidateClaim(claim, tmpl)
			_ = ValidateClaimMetadata(claim)
			if rej == nil {
				_, _ = ClaimSandbox(ClaimInputs{Claim: claim, Template: tmpl})
			}
			member := &sandboxv1beta1.Sandbox{}
			member.Name, member.Namespace, member.UID, member.ResourceVersion = "m", claim.Namespace, "u", "1"
			_, _ = Adoption(claim, tmpl, member, "m")
			_ = Adopted(claim, tmpl, member)
			_ = ClaimExpiry(claim, fuzzNow.Time)
			_ = ClaimStatus(ClaimStatusInputs{Claim: claim, Rejection: rej, Now: fuzzNow})
		})
	})
}
