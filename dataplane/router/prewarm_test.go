package router

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
)

// latest is the last connection dialled to the Pod name.
func (k *fakeKubelet) latest(name string) *fakeConn {
	k.mu.Lock()
	defer k.mu.Unlock()
	for i := len(k.conns) - 1; i >= 0; i-- {
		if k.conns[i].pod == name {
			return k.conns[i]
		}
	}
	return nil
}

// eventually waits up to 5 s for ok.
func eventually(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !ok(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("after 5 s: %s", what)
		}
	}
}

// TestPortForwardPrewarm: warm pool members' Pods are connected before
// their first request, up to the limit, with no idle timeout while they
// wait; the first request rides that connection; a claimed member's
// connection gets the idle timeout; one that ends is dialled again while
// its Pod waits in the pool, never after the Pod is gone or the router
// stops.
func TestPortForwardPrewarm(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }))
	defer srv.Close()
	_, portStr, _ := net.SplitHostPort(srv.Listener.Addr().String())
	port, _ := strconv.Atoi(portStr)

	k := &fakeKubelet{}
	m := NewMetrics(prometheus.NewRegistry())
	pf := NewPortForward(k.dial, time.Minute, m)
	pf.retry = 20 * time.Millisecond
	pf.Prewarm("uid-off", "team", "off") // the default limit is 0: off
	if pf.Prewarmed() != 0 {
		t.Fatalf("prewarmed %d Pods with no limit set", pf.Prewarmed())
	}
	pf.SetPrewarm(2)
	pf.Prewarm("uid-a", "team", "a")
	pf.Prewarm("uid-b", "team", "b")
	pf.Prewarm("uid-c", "team", "c") // over the limit: dialled at its first request
	pf.Prewarm("uid-a", "team", "a") // again: nothing more
	eventually(t, "two prewarm dials", func() bool { return testutil.ToFloat64(m.prewarms.WithLabelValues(prewarmDialled)) == 2 })
	if k.dials.Load() != 2 || pf.Prewarmed() != 2 {
		t.Fatalf("%d dials, %d prewarmed; want 2 and 2 (the limit)", k.dials.Load(), pf.Prewarmed())
	}
	for _, pod := range []string{"a", "b"} {
		if c := k.latest(pod); c.idle() != 0 {
			t.Errorf("prewarmed connection to %s has idle timeout %s while its Pod waits in the pool", pod, c.idle())
		}
	}

	// The first request to a prewarmed Pod dials nothing.
	pf.Remember("uid-a", "team", "a")
	c, err := pf.DialPod(context.Background(), "uid-a", port)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.WriteString(c, "GET / HTTP/1.0\r\n\r\n")
	if b, _ := io.ReadAll(c); len(b) == 0 {
		t.Error("nothing came back through the prewarmed connection")
	}
	_ = c.Close()
	if k.dials.Load() != 2 {
		t.Errorf("%d dials after the first request to a prewarmed Pod, want still 2", k.dials.Load())
	}
	// Claimed: the connection stays, under the idle timeout, and is not
	// dialled again once it ends.
	pf.Unwarm("uid-a")
	if k.latest("a").idle() != time.Minute || pf.Prewarmed() != 1 {
		t.Errorf("claimed member: idle timeout %s, %d prewarmed; want 1m0s and 1", k.latest("a").idle(), pf.Prewarmed())
	}

	// A waiting member's connection ends: it is dialled again.
	first := k.latest("b")
	_ = first.Close()
	eventually(t, "the ended connection dialled again", func() bool { return k.dials.Load() == 3 && k.latest("b") != first })
	// The Pod is deleted: closed, never dialled again.
	pf.Forget("uid-b")
	eventually(t, "the deleted Pod's connection closed", func() bool { return k.latest("b").isClosed() })
	_ = k.latest("a").Close() // the claimed one ends
	time.Sleep(10 * pf.retry)
	if k.dials.Load() != 3 || pf.Prewarmed() != 0 {
		t.Errorf("%d dials, %d prewarmed after the Pod went and the claimed one ended; want 3 and 0", k.dials.Load(), pf.Prewarmed())
	}

	// A dial that fails is tried again while the Pod waits; Close stops it.
	pf.Prewarm("uid-u", "team", "unreachable")
	eventually(t, "failed dials retried", func() bool { return testutil.ToFloat64(m.prewarms.WithLabelValues(prewarmFailed)) >= 3 })
	pf.Close()
	time.Sleep(3 * pf.retry)
	n := k.dials.Load()
	time.Sleep(10 * pf.retry)
	if k.dials.Load() != n {
		t.Errorf("dialled %d more times after Close", k.dials.Load()-n)
	}
}

// TestUnclaimedReadyMember: only a Running, Ready, not deleting Pod that
// still carries the warm-pool label is connected ahead, and trimPod keeps
// that label.
func TestUnclaimedReadyMember(t *testing.T) {
	member := func(mut func(p *corev1.Pod)) *corev1.Pod {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "m", Namespace: "team", UID: types.UID("u"),
				Labels: map[string]string{sandboxv1beta1.LabelWarmPoolSandbox: "abcd1234", sandboxv1beta1.LabelSandboxNameHash: "1"}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{
				{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}, {Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
		}
		if mut != nil {
			mut(p)
		}
		trimmed, _ := trimPod(p)
		return trimmed.(*corev1.Pod)
	}
	for name, c := range map[string]struct {
		pod  *corev1.Pod
		want bool
	}{
		"ready member":   {member(nil), true},
		"claimed":        {member(func(p *corev1.Pod) { delete(p.Labels, sandboxv1beta1.LabelWarmPoolSandbox) }), false},
		"not ready":      {member(func(p *corev1.Pod) { p.Status.Conditions[1].Status = corev1.ConditionFalse }), false},
		"no ready cond.": {member(func(p *corev1.Pod) { p.Status.Conditions = nil }), false},
		"pending":        {member(func(p *corev1.Pod) { p.Status.Phase = corev1.PodPending }), false},
		"deleting":       {member(func(p *corev1.Pod) { p.DeletionTimestamp = &metav1.Time{Time: time.Now()} }), false},
	} {
		if got := unclaimedReadyMember(c.pod); got != c.want {
			t.Errorf("%s: %v, want %v", name, got, c.want)
		}
	}
}
