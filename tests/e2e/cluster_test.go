package e2e

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/agentsandbox/reconciler/tests/cluster"
)

// TestLocalCluster starts a local cluster, checks that garbage collection
// knows our kinds at once, runs a plain Pod to Running and Ready with an IP
// under a gVisor RuntimeClass, checks that our CRDs are served, and tears
// the cluster down with no process left behind.
func TestLocalCluster(t *testing.T) {
	if cluster.UseKind() {
		t.Skip("checks the kwok cluster's own processes; not applicable with E2E_CLUSTER=kind")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	workdir, err := os.MkdirTemp("", "agent-sandbox-e2e-")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = os.RemoveAll(workdir) }()

	start := time.Now()
	c, err := cluster.Start(ctx, cluster.Options{
		Name: "e2e-lifecycle", Workdir: workdir, Nodes: 2,
		InstallCRDs: true, RuntimeClasses: []string{"gvisor", "kata"}, Log: testWriter{t},
	})
	if err != nil {
		t.Fatalf("starting local cluster: %v", err)
	}
	t.Logf("local cluster up with 2 Ready nodes in %s", time.Since(start).Round(time.Millisecond))
	stopped := false
	defer func() {
		if !stopped {
			_ = c.Stop(context.WithoutCancel(ctx))
		}
	}()
	// Garbage collection knows our kinds as soon as the cluster is up.
	ownedCollectedAtOnce(t, c)

	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	version, err := cs.Discovery().ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(version.GitVersion, "v1.37.") {
		t.Errorf("server version = %s, want v1.37.x (the version stamped at build time)", version.GitVersion)
	}
	if _, err := cs.Discovery().ServerResourcesForGroupVersion("agents.x-k8s.io/v1beta1"); err != nil {
		t.Errorf("CRDs not served: %v", err)
	}

	gvisor := "gvisor"
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "hello", Namespace: "default"},
		Spec: corev1.PodSpec{
			RuntimeClassName: &gvisor,
			Containers:       []corev1.Container{{Name: "main", Image: "registry.k8s.io/pause:3.10"}},
		},
	}
	created := time.Now()
	if _, err := cs.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating pod: %v", err)
	}
	var got *corev1.Pod
	for {
		got, err = cs.CoreV1().Pods("default").Get(ctx, "hello", metav1.GetOptions{})
		if err == nil && got.Status.Phase == corev1.PodRunning && isReady(got) && got.Status.PodIP != "" && got.Spec.NodeName != "" {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("pod not Running+Ready with an IP: %+v (last error %v)", got.Status, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("pod Running and Ready on %s with IP %s after %s", got.Spec.NodeName, got.Status.PodIP, time.Since(created).Round(time.Millisecond))

	clusterDir := c.Workdir + "/clusters/" + c.Name
	if len(cluster.Processes(clusterDir)) < 5 {
		t.Errorf("expected at least 5 cluster processes (etcd, apiserver, controller-manager, scheduler, kwok), found %v", cluster.Processes(clusterDir))
	}
	stopped = true
	if err := c.Stop(ctx); err != nil {
		t.Fatalf("stopping: %v", err)
	}
	if left := cluster.Processes(clusterDir); len(left) > 0 {
		t.Fatalf("processes left behind after stop: %v", left)
	}
}

func isReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// testWriter sends kwokctl's output to the test log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
