package standin_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/agentsandbox/reconciler/localcluster/standin"
	"github.com/agentsandbox/reconciler/tests/envtest"
)

// `kubectl-sandbox kubelet` pointed at another API server (an envtest
// kube-apiserver, with a CA of its own) than the local cluster recorded in
// its directory refuses to start; so does one whose directory records no
// cluster. Pointed at the recorded cluster, the check passes.
func TestKubeletRefusesAnotherCluster(t *testing.T) {
	env, err := envtest.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = env.Stop() }()
	other := env.Kubeconfig(t)

	// The local cluster the directory belongs to: another server, and
	// another CA.
	dir := t.TempDir()
	local := &rest.Config{Host: "https://127.0.0.1:1", TLSClientConfig: rest.TLSClientConfig{CAData: []byte("local cluster CA")}}
	if err := standin.RecordCluster(dir, local); err != nil {
		t.Fatal(err)
	}
	runKubelet := func(dir string) (int, string) {
		t.Helper()
		var stderr syncBuffer
		done := make(chan int, 1)
		go func() {
			done <- standin.Main([]string{"--kubeconfig", other, "--dir", dir, "--runtime", "/bin/true"}, &stderr)
		}()
		select {
		case code := <-done:
			return code, stderr.String()
		case <-time.After(30 * time.Second):
			// It runs: it started against the other cluster (and is
			// left to end with the test binary).
			t.Fatalf("the stand-in kubelet started against another API server:\n%s", stderr.String())
			return 0, ""
		}
	}
	code, out := runKubelet(dir)
	if code != 1 || !strings.Contains(out, "is not the local cluster this stand-in was started for (https://127.0.0.1:1") {
		t.Errorf("against another API server: exit %d, %s", code, out)
	}
	empty := t.TempDir()
	code, out = runKubelet(empty)
	if code != 1 || !strings.Contains(out, standin.ClusterFile+" is missing") {
		t.Errorf("without a recorded cluster: exit %d, %s", code, out)
	}
	if entries, _ := os.ReadDir(empty); len(entries) != 0 {
		t.Errorf("a refused stand-in wrote into its directory: %v", entries)
	}

	cfg, err := clientcmd.BuildConfigFromFlags("", other)
	if err != nil {
		t.Fatal(err)
	}
	// The same URL with another CA (a cluster made again on the same
	// port) is another cluster too.
	sameURL := &rest.Config{Host: cfg.Host, TLSClientConfig: rest.TLSClientConfig{CAData: []byte("another CA")}}
	if err := standin.RecordCluster(dir, sameURL); err != nil {
		t.Fatal(err)
	}
	if err := standin.CheckCluster(dir, cfg); err == nil || !strings.Contains(err.Error(), "its CA differs") {
		t.Errorf("the same URL with another CA: %v", err)
	}
	// The recorded cluster itself: the CA from a file or inline alike.
	if err := standin.RecordCluster(dir, env.Config); err != nil {
		t.Fatal(err)
	}
	if err := standin.CheckCluster(dir, cfg); err != nil {
		t.Errorf("the recorded cluster: %v", err)
	}
	caFile := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(caFile, env.Config.CAData, 0o600); err != nil {
		t.Fatal(err)
	}
	fromFile := &rest.Config{Host: env.Config.Host + "/", TLSClientConfig: rest.TLSClientConfig{CAFile: caFile}}
	if err := standin.CheckCluster(dir, fromFile); err != nil {
		t.Errorf("the recorded cluster, CA from a file: %v", err)
	}
	// A server that is not on this machine is refused whatever is recorded.
	remote := &rest.Config{Host: "https://203.0.113.10:6443", TLSClientConfig: rest.TLSClientConfig{CAData: []byte("x")}}
	if err := standin.RecordCluster(dir, remote); err != nil {
		t.Fatal(err)
	}
	if err := standin.CheckCluster(dir, remote); err == nil || !strings.Contains(err.Error(), "is not on this machine") {
		t.Errorf("a remote API server: %v", err)
	}
}

// syncBuffer is a bytes.Buffer safe for a writer and a reader at once.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
