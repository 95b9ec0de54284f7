package e2e

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	"github.com/agentsandbox/reconciler/localcluster/standin"
	"github.com/agentsandbox/reconciler/tests/cluster"
)

// TestLocalClusterRefusesBrowsers: the local router (as `kubectl sandbox up`
// starts it) and a runtime of the stand-in kubelet (reached by
// port-forward) run a command for a program, but not for a web page: a
// request whose Host is attacker.example (what DNS rebinding sends) and one
// whose Origin is another site are refused 403 and their command never
// runs.
func TestLocalClusterRefusesBrowsers(t *testing.T) {
	if cluster.UseKind() {
		t.Skip("the stand-in kubelet serves the kwok cluster's fake Pods; kind runs them for real")
	}
	c := newClient(t)
	ns := namespace(t, c)
	key := types.NamespacedName{Namespace: ns, Name: "guarded"}
	if err := c.Create(context.Background(), sandbox(ns, "guarded")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, time.Minute, "Ready", readyIs(c, key, metav1.ConditionTrue, sandboxv1beta1.ReasonDependenciesReady))
	r := startRouter(t)
	workDir := standin.WorkDir(standIn.Dir, standin.Key{Namespace: ns, Name: "guarded"})

	post := func(base, host, origin, command string, router bool) (int, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, base+"/execute", strings.NewReader(`{"command": "`+command+`"}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		if router {
			req.Header.Set("X-Sandbox-ID", "guarded")
			req.Header.Set("X-Sandbox-Namespace", ns)
		}
		if host != "" {
			req.Host = host
		}
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	port := r.URL[strings.LastIndexByte(r.URL, ':')+1:]
	// The router's answer to a program (retried: the router's cache may
	// not show the Sandbox Ready yet, the runtime may just be starting).
	waitFor(t, time.Minute, "echo through the router", func() error {
		status, body := post(r.URL, "", "", "echo hi", true)
		if status != http.StatusOK || !strings.Contains(body, `"stdout":"hi\n"`) {
			return &unexpected{status, body}
		}
		return nil
	})
	if status, body := post(r.URL, "localhost:"+port, "", "echo hi", true); status != http.StatusOK {
		t.Errorf("router, Host localhost: %d %s", status, body)
	}
	for _, tc := range []struct{ name, host, origin string }{
		{"router, Host attacker.example", "attacker.example:" + port, ""},
		{"router, Host and Origin attacker.example", "attacker.example:" + port, "http://attacker.example:" + port},
		{"router, foreign Origin", "", "https://attacker.example"},
	} {
		if status, body := post(r.URL, tc.host, tc.origin, "touch router-ran", true); status != http.StatusForbidden {
			t.Errorf("%s: %d %s, want 403", tc.name, status, body)
		}
	}

	// The runtime itself, through the API server's port-forward, as
	// `kubectl port-forward pod/guarded 8888` reaches it.
	base := forward(t, local.Config, ns, "guarded")
	if status, body := post(base, "", "", "echo hi", false); status != http.StatusOK || !strings.Contains(body, `"stdout":"hi\n"`) {
		t.Errorf("runtime by port-forward: %d %s", status, body)
	}
	fwdPort := base[strings.LastIndexByte(base, ':')+1:]
	for _, tc := range []struct{ name, host, origin string }{
		{"runtime, Host attacker.example", "attacker.example:" + fwdPort, ""},
		{"runtime, foreign Origin", "", "https://attacker.example"},
	} {
		if status, body := post(base, tc.host, tc.origin, "touch runtime-ran", false); status != http.StatusForbidden {
			t.Errorf("%s: %d %s, want 403", tc.name, status, body)
		}
	}
	for _, f := range []string{"router-ran", "runtime-ran"} {
		if _, err := os.Stat(filepath.Join(workDir, f)); !os.IsNotExist(err) {
			t.Errorf("a refused request ran its command: %s exists (%v)", f, err)
		}
	}
}

type unexpected struct {
	status int
	body   string
}

func (u *unexpected) Error() string { return http.StatusText(u.status) + ": " + u.body }
