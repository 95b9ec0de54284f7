package e2e

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	"github.com/agentsandbox/reconciler/tests"
)

// TestSandboxBeforeItsServiceAccount: a GitOps tool applies a Sandbox and
// the ServiceAccount its Pod runs as in any order. Until the account
// exists the API server refuses the Pod; the Sandbox says so in its Ready
// condition, the controller retries with its bounded backoff (counted as
// reason service_account, not logged as an error), and once the account
// is there the Sandbox comes up on its own.
func TestSandboxBeforeItsServiceAccount(t *testing.T) {
	c := newClient(t)
	ns := namespace(t, c)
	const account = "agent-late"
	sb := tests.Sandbox(ns, "before-its-account", func(sb *sandboxv1beta1.Sandbox) {
		sb.Spec.PodTemplate.Spec.ServiceAccountName = account
	})
	if err := c.Create(context.Background(), sb); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(sb)
	waitFor(t, time.Minute, "the refusal reported in Ready", func() error {
		err := readyIs(c, key, metav1.ConditionFalse, sandboxv1beta1.ReasonReconcilerError)()
		if err != nil {
			return err
		}
		got := &sandboxv1beta1.Sandbox{}
		if err := c.Get(context.Background(), key, got); err != nil {
			return err
		}
		for _, cond := range got.Status.Conditions {
			if cond.Type == sandboxv1beta1.ConditionReady && !strings.Contains(cond.Message, "service account") {
				return errors.New("Ready's message does not name the service account: " + cond.Message)
			}
		}
		return nil
	})
	series := `agent_sandbox_reconcile_retries_total{controller="sandbox",reason="service_account"}`
	waitFor(t, 30*time.Second, "the retry counted as expected", func() error {
		return expectMetrics("http://"+running.Metrics+"/metrics", map[string]func(float64) bool{series: func(v float64) bool { return v > 0 }})
	})

	if err := c.Create(context.Background(), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: account}}); err != nil {
		t.Fatal(err)
	}
	// The backoff is at most 30 s apart; the rest is the Pod starting.
	took := waitFor(t, time.Minute, "Sandbox Ready once its ServiceAccount exists",
		readyIs(c, key, metav1.ConditionTrue, sandboxv1beta1.ReasonDependenciesReady))
	t.Logf("Ready %s after the ServiceAccount was created", took.Round(time.Millisecond))
}
