package main

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// apiRecorder is an API server that finds nothing and remembers who asked.
type apiRecorder struct {
	mu   sync.Mutex
	reqs []*http.Request
}

func (r *apiRecorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	r.reqs = append(r.reqs, req.Clone(req.Context()))
	r.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusNotFound)
	_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404,"message":"not found"}`))
}

func (r *apiRecorder) requests() []*http.Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*http.Request(nil), r.reqs...)
}

// TestKubectlFlagsReachTheAPIServer: --server, --token, --as, --as-group
// and --request-timeout decide where exec, cp, diff and --from-cluster go and
// as whom, whatever the kubeconfig says (here: none), as with kubectl.
func TestKubectlFlagsReachTheAPIServer(t *testing.T) {
	t.Setenv("KUBECONFIG", filepath.Join(t.TempDir(), "none"))
	claim := filepath.Join(t.TempDir(), "claim.yaml")
	writeFile(t, claim, "apiVersion: extensions.agents.x-k8s.io/v1beta1\nkind: SandboxClaim\nmetadata: {name: c, namespace: team}\nspec:\n  warmPoolRef: {name: elsewhere}\n")
	// Credentials go over TLS only (client-go's rule, as for kubectl).
	flags := []string{"--insecure-skip-tls-verify", "--token", "s3cret", "--as", "alice", "--as-group", "devs", "--request-timeout", "7s", "-n", "team"}
	for _, tc := range []struct {
		name string
		args []string
		path string // a request the command makes ("": any)
	}{
		{"exec", []string{"exec", "my-claim", "--", "ls"}, "/apis/extensions.agents.x-k8s.io/v1beta1/namespaces/team/sandboxclaims/my-claim"},
		{"cp", []string{"cp", "my-claim:a.txt", "-"}, "/apis/extensions.agents.x-k8s.io/v1beta1/namespaces/team/sandboxclaims/my-claim"},
		{"render --from-cluster", []string{"render", "--from-cluster", "-f", claim}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &apiRecorder{}
			srv := httptest.NewTLSServer(rec)
			defer srv.Close()
			args := append(append([]string{tc.args[0], "--server", srv.URL}, flags...), tc.args[1:]...)
			_, stderr, code := runCLI(t, "", args...)
			if code == exitUsage {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			reqs := rec.requests()
			found := false
			for _, r := range reqs {
				if got := r.Header.Get("Authorization"); got != "Bearer s3cret" {
					t.Errorf("%s %s: Authorization %q, want the --token", r.Method, r.URL.Path, got)
				}
				if got := r.Header.Get("Impersonate-User"); got != "alice" {
					t.Errorf("%s %s: Impersonate-User %q, want --as", r.Method, r.URL.Path, got)
				}
				if got := r.Header.Values("Impersonate-Group"); strings.Join(got, ",") != "devs" {
					t.Errorf("%s %s: Impersonate-Group %q, want --as-group", r.Method, r.URL.Path, got)
				}
				if r.URL.Path == tc.path || tc.path == "" {
					found = true
					if got := r.URL.Query().Get("timeout"); got != "7s" {
						t.Errorf("%s: timeout=%q, want --request-timeout's 7s", r.URL.Path, got)
					}
				}
			}
			if !found {
				paths := make([]string, len(reqs))
				for i, r := range reqs {
					paths[i] = r.URL.Path
				}
				t.Errorf("no request for %s at --server; got %q (stderr: %s)", tc.path, paths, stderr)
			}
		})
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}
