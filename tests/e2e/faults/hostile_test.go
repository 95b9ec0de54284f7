package faults

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	"github.com/agentsandbox/reconciler/tests"
)

// TestHostileInput sends Sandboxes at and past the limits. Each must end
// Ready, or be refused by the API server, or end Ready=False with a reason
// and a message that says what is wrong; the controller must survive all of
// them and not retry what cannot succeed in a hot loop.
func TestHostileInput(t *testing.T) {
	c := newClient(t)
	ctrl := startController(t, "ctrl", "--leader-elect=false")
	ns := namespace(t, c, "hostile")

	long := func(n int) string { return "s" + strings.Repeat("x", n-1) }
	labels := func(n int) map[string]string {
		m := make(map[string]string, n)
		for i := range n {
			m[fmt.Sprintf("example.com/label-%05d", i)] = fmt.Sprintf("value-%05d", i)
		}
		return m
	}
	cases := []struct {
		name   string
		mutate func(*sandboxv1beta1.Sandbox)
		// ready: must become Ready; otherwise a clear Ready=False (or
		// refusal) mentioning want.
		ready bool
		want  string
	}{
		{name: "huge-labels", ready: true, mutate: func(sb *sandboxv1beta1.Sandbox) {
			sb.Labels = labels(2000)
			sb.Spec.PodTemplate.ObjectMeta.Labels = labels(2000)
		}},
		{name: "hundred-containers", ready: true, mutate: func(sb *sandboxv1beta1.Sandbox) {
			base := sb.Spec.PodTemplate.Spec.Containers[0]
			sb.Spec.PodTemplate.Spec.Containers = nil
			for i := range 100 {
				ct := *base.DeepCopy()
				ct.Name = fmt.Sprintf("c%03d", i)
				ct.Ports = []corev1.ContainerPort{{ContainerPort: int32(8000 + i)}}
				ct.Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1m")}
				sb.Spec.PodTemplate.Spec.Containers = append(sb.Spec.PodTemplate.Spec.Containers, ct)
			}
		}},
		{name: long(63), ready: true},
		{name: long(64), want: "63"},
		{name: long(253), want: "63"},
		{name: "pvc-name-too-long", want: "253", mutate: func(sb *sandboxv1beta1.Sandbox) {
			sb.Spec.VolumeClaimTemplates = []sandboxv1beta1.PersistentVolumeClaimTemplate{{
				EmbeddedObjectMetadata: sandboxv1beta1.EmbeddedObjectMetadata{Name: long(240)},
				Spec: corev1.PersistentVolumeClaimSpec{
					AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
				},
			}}
		}},
		{name: "bad-pod-label", want: "label", mutate: func(sb *sandboxv1beta1.Sandbox) {
			sb.Spec.PodTemplate.ObjectMeta.Labels = map[string]string{"not a valid key!": "x"}
		}},
		{name: "huge-pod-annotations", want: "262144", mutate: func(sb *sandboxv1beta1.Sandbox) {
			sb.Spec.PodTemplate.ObjectMeta.Annotations = map[string]string{"example.com/blob": strings.Repeat("a", 300*1024)}
		}},
		{name: "bad-container-port", want: "70000", mutate: func(sb *sandboxv1beta1.Sandbox) {
			sb.Spec.PodTemplate.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 70000}}
		}},
	}
	type outcome struct {
		Name, Result, Reason, Message string
		Seconds                       float64
	}
	var outcomes []outcome
	start := time.Now()
	created := map[string]bool{}
	for _, tc := range cases {
		sb := sandbox(ns, tc.name, func(sb *sandboxv1beta1.Sandbox) {
			sb.Spec.Service = ptr.To(true)
			if tc.mutate != nil {
				tc.mutate(sb)
			}
		})
		if err := c.Create(context.Background(), sb); err != nil {
			if tc.ready {
				t.Errorf("%s: refused by the API server: %v", short(tc.name), err)
			}
			outcomes = append(outcomes, outcome{Name: short(tc.name), Result: "refused by the API server", Message: truncate(err.Error(), 200)})
			continue
		}
		created[tc.name] = true
	}
	for _, tc := range cases {
		if !created[tc.name] {
			continue
		}
		var got *sandboxv1beta1.Sandbox
		took := waitFor(t, time.Minute, short(tc.name)+" settles", func() error {
			sb := &sandboxv1beta1.Sandbox{}
			if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: tc.name}, sb); err != nil {
				return err
			}
			cond := meta.FindStatusCondition(sb.Status.Conditions, sandboxv1beta1.ConditionReady)
			switch {
			case cond == nil:
				return fmt.Errorf("no Ready condition")
			case tc.ready && cond.Status != "True":
				return fmt.Errorf("Ready=%s %s: %s", cond.Status, cond.Reason, cond.Message)
			case !tc.ready && (cond.Status != "False" || !strings.Contains(cond.Message, tc.want)):
				return fmt.Errorf("Ready=%s %s: %s (want a message mentioning %q)", cond.Status, cond.Reason, cond.Message, tc.want)
			}
			got = sb
			return nil
		})
		cond := meta.FindStatusCondition(got.Status.Conditions, sandboxv1beta1.ConditionReady)
		outcomes = append(outcomes, outcome{Name: short(tc.name), Result: "Ready=" + string(cond.Status), Reason: cond.Reason,
			Message: truncate(cond.Message, 200), Seconds: took.Seconds()})
	}
	settled := time.Since(start)

	// Nothing that cannot succeed is retried hot: over 20 quiet seconds the
	// controller writes at most a handful of times (backoff retries).
	before, err := scrape(ctrl.Metrics)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Second)
	after, err := scrape(ctrl.Metrics)
	if err != nil {
		t.Fatal(err)
	}
	quietWrites := writes(after) - writes(before)
	changed := tests.MetricChanges(before, after, "rest_client_requests_total{", "agent_sandbox_apply_total{", "agent_sandbox_reconcile_retries_total{")
	alive := syscall.Kill(ctrl.PID, 0) == nil
	errs, examples := errorLines(t, ctrl.LogPath)
	report(t, map[string]any{"settledSeconds": settled.Seconds(), "outcomes": outcomes, "controllerAlive": alive,
		"writesIn20QuietSeconds": quietWrites, "quietChanged": changed, "errorLines": errs, "examples": examples})
	if !alive {
		t.Fatal("the controller died")
	}
	if quietWrites > 5 {
		t.Errorf("the controller wrote %v times in 20 quiet seconds: a hot retry loop", quietWrites)
	}
}

func short(name string) string {
	if len(name) > 20 {
		return fmt.Sprintf("%s...(%d chars)", name[:8], len(name))
	}
	return name
}
