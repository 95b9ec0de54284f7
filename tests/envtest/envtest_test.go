package envtest

import (
	"os"
	"slices"
	"testing"

	"github.com/agentsandbox/reconciler/tests"
)

func TestNamespacePrefix(t *testing.T) {
	for in, want := range map[string]string{
		"TestApply/Sandbox":                      "testapply-sandbox-",
		"TestX/unset_to_set":                     "testx-unset-to-set-",
		"__":                                     "t-",
		"TestAVeryLongNameThatKeepsGoingOnAndOn": "testaverylongnamethatkeepsgoingonandon-",
		"TestAVeryLongNameThatKeepsGoingOnAndOnAndOnAndOn": "testaverylongnamethatkeepsgoingonandonan-",
	} {
		if got := NamespacePrefix(in); got != want {
			t.Errorf("NamespacePrefix(%q) = %q, want %q", in, got, want)
		}
	}
}

// The API server and etcd envtest starts for the integration tests listen
// on loopback only (read from their sockets, not their flags).
func TestLoopbackOnly(t *testing.T) {
	if testing.Short() {
		t.Skip("starts kube-apiserver and etcd")
	}
	before := tests.Children(os.Getpid())
	e, err := Start()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = e.Stop() }()
	var started []int
	for _, pid := range tests.Children(os.Getpid()) {
		if !slices.Contains(before, pid) {
			started = append(started, pid)
		}
	}
	socks, err := tests.Listening(started...)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, s := range socks {
		t.Logf("listening: %s", s)
		seen[s.Comm] = true
	}
	for _, s := range tests.NotLoopback(socks) {
		t.Errorf("reachable from other machines: %s", s)
	}
	for _, want := range []string{"etcd", "kube-apiserver"} {
		if !seen[want] {
			t.Errorf("no listening socket of %s found among %v", want, socks)
		}
	}
}
