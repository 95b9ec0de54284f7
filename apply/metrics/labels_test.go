package metrics

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	"github.com/agentsandbox/reconciler/policy"
)

// labelValues collects one label's values over every series of c.
func labelValues(t *testing.T, c prometheus.Collector, label string) map[string]float64 {
	t.Helper()
	ch := make(chan prometheus.Metric, 4096)
	go func() { c.Collect(ch); close(ch) }()
	out := map[string]float64{}
	for m := range ch {
		var pb dto.Metric
		if err := m.Write(&pb); err != nil {
			t.Fatal(err)
		}
		v := pb.GetCounter().GetValue() + pb.GetGauge().GetValue() + float64(pb.GetHistogram().GetSampleCount())
		for _, l := range pb.GetLabel() {
			if l.GetName() == label {
				out[l.GetValue()] += v
			}
		}
	}
	return out
}

func TestLabelCardinalityIsBounded(t *testing.T) {
	long := strings.Repeat("t", 300)
	for i := range 1000 {
		ObserveClaimCreation(sandboxv1beta1.LaunchTypeCold, fmt.Sprintf("tpl-%d", i))
	}
	ObserveClaimCreation("made-up-launch-type", long)
	now := time.Now()
	for i := range 500 {
		sb := &sandboxv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{
			Namespace: fmt.Sprintf("ns-%d", i), CreationTimestamp: metav1.NewTime(now.Add(-time.Second)),
			Annotations: map[string]string{sandboxv1beta1.AnnotationSandboxTemplateRef: fmt.Sprintf("other-tpl-%d", i)},
		}}
		ObserveReady(sb, now)
	}
	for i := range 300 {
		ObserveDecisions([]policy.Decision{{Policy: fmt.Sprintf("policy-%d", i), Rule: i, Action: policy.Deny}})
	}

	for _, tc := range []struct {
		name      string
		collector prometheus.Collector
		label     string
		max       int
	}{
		{"claim creations by template", ClaimCreations, "sandbox_template", maxTemplates + 1},
		{"claim creations by launch type", ClaimCreations, "launch_type", 3},
		{"creation latency by namespace", CreationLatency, "namespace", maxNamespaces + 1},
		{"creation latency by template", CreationLatency, "sandbox_template", maxTemplates + 1},
		{"policy decisions by policy", PolicyDecisions, "policy", maxPolicies + 1},
		{"policy decisions by rule", PolicyDecisions, "rule", maxRules + 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := labelValues(t, tc.collector, tc.label)
			if len(got) > tc.max {
				t.Errorf("%d distinct values, want at most %d", len(got), tc.max)
			}
			if got[Other] == 0 {
				t.Errorf("no %q series: values past the cap were dropped instead of counted", Other)
			}
			for v := range got {
				if len(v) > MaxLabelValueLength {
					t.Errorf("value of %d bytes", len(v))
				}
			}
		})
	}
	if got := labelValues(t, ClaimCreations, "sandbox_template"); got[Other] != 1000+1-maxTemplates {
		t.Errorf("other counts %v claims, want %d", got[Other], 1000+1-maxTemplates)
	}
}

func TestSandboxCollectorBounded(t *testing.T) {
	var objs []*sandboxv1beta1.Sandbox
	for i := range 400 {
		objs = append(objs, &sandboxv1beta1.Sandbox{ObjectMeta: metav1.ObjectMeta{
			Namespace: fmt.Sprintf("ns-%d", i%250), Name: fmt.Sprintf("sb-%d", i),
			Labels:      map[string]string{sandboxv1beta1.LabelLaunchType: fmt.Sprintf("launch-%d", i)},
			Annotations: map[string]string{sandboxv1beta1.AnnotationSandboxTemplateRef: fmt.Sprintf("tpl-%d-%s", i, strings.Repeat("x", 200))},
		}})
	}
	c := &SandboxCollector{Indexer: indexerOf(t, objs...)}
	for label, want := range map[string]int{"namespace": maxNamespaces + 1, "sandbox_template": maxTemplates + 1, "launch_type": 1} {
		got := labelValues(t, c, label)
		if len(got) > want {
			t.Errorf("%s: %d distinct values, want at most %d", label, len(got), want)
		}
		total := 0.0
		for v, n := range got {
			total += n
			if len(v) > MaxLabelValueLength {
				t.Errorf("%s: value of %d bytes", label, len(v))
			}
		}
		if total != 400 {
			t.Errorf("%s: the series count %v Sandboxes, want 400", label, total)
		}
	}
}

func scheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	if err := sandboxv1beta1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return s
}
