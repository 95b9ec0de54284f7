package e2b

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
)

func TestClaimState(t *testing.T) {
	cond := func(status metav1.ConditionStatus, reason string, gen int64) []metav1.Condition {
		return []metav1.Condition{{Type: extv1beta1.ConditionReady, Status: status, Reason: reason, ObservedGeneration: gen}}
	}
	now := metav1.Now()
	for _, c := range []struct {
		name        string
		claim       extv1beta1.SandboxClaim
		ready, fail bool
	}{
		{"no status", extv1beta1.SandboxClaim{}, false, false},
		{"ready", extv1beta1.SandboxClaim{Status: extv1beta1.SandboxClaimStatus{Conditions: cond("True", "DependenciesReady", 0), Sandbox: extv1beta1.ClaimedSandbox{Name: "sb"}}}, true, false},
		{"ready without a sandbox name", extv1beta1.SandboxClaim{Status: extv1beta1.SandboxClaimStatus{Conditions: cond("True", "DependenciesReady", 0)}}, false, false},
		{"stale condition", extv1beta1.SandboxClaim{ObjectMeta: metav1.ObjectMeta{Generation: 2}, Status: extv1beta1.SandboxClaimStatus{Conditions: cond("False", extv1beta1.ReasonWarmPoolNotFound, 1)}}, false, false},
		{"pool missing", extv1beta1.SandboxClaim{Status: extv1beta1.SandboxClaimStatus{Conditions: cond("False", extv1beta1.ReasonWarmPoolNotFound, 0)}}, false, true},
		{"env refused", extv1beta1.SandboxClaim{Status: extv1beta1.SandboxClaimStatus{Conditions: cond("False", extv1beta1.ReasonEnvVarsInjectionRejected, 0)}}, false, true},
		{"starting", extv1beta1.SandboxClaim{Status: extv1beta1.SandboxClaimStatus{Conditions: cond("False", extv1beta1.ReasonSandboxNotReady, 0)}}, false, false},
		{"being deleted", extv1beta1.SandboxClaim{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &now}}, false, true},
	} {
		ready, failed := claimState(&c.claim)
		if ready != c.ready || (failed != "") != c.fail {
			t.Errorf("%s: ready %t, failed %q", c.name, ready, failed)
		}
	}
}

func TestCheckCreate(t *testing.T) {
	s := New(Options{})
	sec := func(n int64) *int64 { return &n }
	yes := true
	no := false
	ok := []createRequest{{TemplateID: "python"}, {TemplateID: "python", Timeout: sec(60), AllowInternetAccess: &yes, AutoPause: &no}}
	for _, r := range ok {
		if e := s.checkCreate(&r); e != nil {
			t.Errorf("%+v refused: %v", r, e)
		}
	}
	bad := []createRequest{{}, {TemplateID: "Py thon"}, {TemplateID: "python", Timeout: sec(0)}, {TemplateID: "python", Timeout: sec(90000)},
		{TemplateID: "python", AutoPause: &yes}, {TemplateID: "python", AllowInternetAccess: &no},
		{TemplateID: "python", VolumeMounts: []byte(`[{"name":"v","path":"/x"}]`)}, {TemplateID: "python", Network: []byte(`{"allowOut":["a"]}`)},
		{TemplateID: "python", Metadata: map[string]string{"": "x"}}, {TemplateID: "python", Metadata: map[string]string{"k": strings.Repeat("v", 5000)}}}
	for _, r := range bad {
		if e := s.checkCreate(&r); e == nil || e.Code != 400 {
			t.Errorf("%+v: want 400, got %v", r, e)
		}
	}
	if _, err := checkEnv(map[string]string{"A=B": "x"}); err == nil {
		t.Error("an env name with = was accepted")
	}
	env, err := checkEnv(map[string]string{"B": "2", "A": "1"})
	if err != nil || len(env) != 2 || env[0].Name != "A" {
		t.Errorf("env %+v, %v: want sorted", env, err)
	}
}

func TestNewClaimMetadata(t *testing.T) {
	req := &createRequest{TemplateID: "python", Metadata: map[string]string{"team": "red", "user": "a b", "k/x": "v"}, AutoResume: &autoResume{Enabled: true}}
	c, err := newClaim("ns", "e2b-abcdefghijkl", "pool", req, time.Unix(1000, 0), nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Labels[MetadataLabelPrefix+"team"] != "red" || len(c.Labels) != 2 || c.Annotations[AnnotationAutoResume] != "true" {
		t.Errorf("labels %v annotations %v", c.Labels, c.Annotations)
	}
	if md := metadataOf(c); md["user"] != "a b" || md["k/x"] != "v" {
		t.Errorf("metadata %v", md)
	}
	if c.Spec.Lifecycle.ShutdownTime.Unix() != 1300 || c.Spec.Lifecycle.ShutdownPolicy != extv1beta1.ShutdownPolicyDelete {
		t.Errorf("lifecycle %+v", c.Spec.Lifecycle)
	}
}
