package integration

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"

	"github.com/agentsandbox/reconciler/tests"
)

// TestSamplesAccepted creates every object of config/samples in a fresh
// namespace: the API server must accept them as written.
func TestSamplesAccepted(t *testing.T) {
	ns := env.Namespace(t)
	files, err := filepath.Glob(filepath.Join(tests.RepoRoot(), "config", "samples", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]bool{}
	for _, f := range files {
		if filepath.Base(f) == "kustomization.yaml" {
			continue
		}
		for _, obj := range readObjects(t, f) {
			obj.SetNamespace(ns)
			if err := env.Client.Create(ctxFor(t), obj); err != nil {
				t.Errorf("%s: %s %q rejected: %v", filepath.Base(f), obj.GetKind(), obj.GetName(), err)
			}
			kinds[obj.GetKind()] = true
		}
	}
	for _, k := range []string{"Sandbox", "SandboxTemplate", "SandboxWarmPool", "SandboxClaim"} {
		if !kinds[k] {
			t.Errorf("config/samples has no %s", k)
		}
	}
}

func readObjects(t *testing.T, path string) []*unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var out []*unstructured.Unstructured
	for {
		obj := &unstructured.Unstructured{}
		if err := dec.Decode(&obj.Object); errors.Is(err, io.EOF) {
			return out
		} else if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if len(obj.Object) > 0 {
			out = append(out, obj)
		}
	}
}

// TestDiscovery checks short names, the agent-sandbox category and the
// subresources as clients discover them.
func TestDiscovery(t *testing.T) {
	dc, err := discovery.NewDiscoveryClientForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]struct {
		shortName   string
		subresource []string
	}{
		"sandboxes":        {"sandbox", []string{"status"}},
		"sandboxtemplates": {"sandboxtemplate", nil},
		"sandboxclaims":    {"sandboxclaim", []string{"status"}},
		"sandboxwarmpools": {"swp", []string{"scale", "status"}},
	}
	found := map[string][]string{}
	for _, gv := range []string{"agents.x-k8s.io/v1beta1", "extensions.agents.x-k8s.io/v1beta1"} {
		list, err := dc.ServerResourcesForGroupVersion(gv)
		if err != nil {
			t.Fatalf("discovering %s: %v", gv, err)
		}
		for _, r := range list.APIResources {
			name, sub, isSub := strings.Cut(r.Name, "/")
			if isSub {
				found[name] = append(found[name], sub)
				continue
			}
			w, ok := want[name]
			if !ok {
				t.Errorf("unexpected resource %s in %s", name, gv)
				continue
			}
			if !r.Namespaced || !slices.Equal(r.ShortNames, []string{w.shortName}) || !slices.Contains(r.Categories, "agent-sandbox") {
				t.Errorf("%s: namespaced=%v shortNames=%v categories=%v; want namespaced, [%s], agent-sandbox",
					name, r.Namespaced, r.ShortNames, r.Categories, w.shortName)
			}
		}
	}
	for name, w := range want {
		got := found[name]
		slices.Sort(got)
		if !slices.Equal(got, w.subresource) {
			t.Errorf("%s subresources = %v, want %v", name, got, w.subresource)
		}
	}
}

// TestKubectl runs the kubectl a user has against the API server: explain
// must show our documentation, the category must list every kind, and the
// printer columns must be there.
func TestKubectl(t *testing.T) {
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Fatalf("kubectl is needed for this test (and by every user of the project): %v", err)
	}
	kubeconfig := env.Kubeconfig(t)
	ns := env.Namespace(t)
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(kubectl, append([]string{"--kubeconfig", kubeconfig}, args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	explain := run("explain", "sandbox.spec.operatingMode")
	for _, want := range []string{"Suspended deletes the Pod but keeps the", "Running", "ENUM"} {
		if !strings.Contains(explain, want) {
			t.Errorf("kubectl explain sandbox.spec.operatingMode lacks %q:\n%s", want, explain)
		}
	}
	run("apply", "-n", ns, "-k", filepath.Join(tests.RepoRoot(), "config", "samples"))
	all := run("get", "agent-sandbox", "-n", ns)
	for _, want := range []string{"sandbox.agents.x-k8s.io/sample-sandbox", "sandboxtemplate.extensions.agents.x-k8s.io/python-runtime",
		"sandboxwarmpool.extensions.agents.x-k8s.io/python-pool", "sandboxclaim.extensions.agents.x-k8s.io/sample-claim"} {
		if !strings.Contains(all, want) {
			t.Errorf("kubectl get agent-sandbox lacks %s:\n%s", want, all)
		}
	}
	for kind, header := range map[string][]string{
		"sandbox":         {"NAME", "READY", "REASON", "AGE"},
		"sandboxclaim":    {"NAME", "READY", "SANDBOX", "REASON", "AGE"},
		"swp":             {"NAME", "READY", "DESIRED", "AGE"},
		"sandboxtemplate": {"NAME", "NETWORKPOLICY", "AGE"},
	} {
		out := run("get", kind, "-n", ns)
		if got := strings.Fields(strings.SplitN(out, "\n", 2)[0]); !slices.Equal(got, header) {
			t.Errorf("kubectl get %s columns = %v, want %v", kind, got, header)
		}
	}
	if out := run("get", "swp", "python-pool", "-n", ns, "-o", "jsonpath={.spec.replicas}"); out != "2" {
		t.Errorf("sample pool replicas = %q, want 2", out)
	}
	run("scale", "swp", "python-pool", "-n", ns, "--replicas=5")
	if out := run("get", "swp", "python-pool", "-n", ns, "-o", "jsonpath={.spec.replicas}"); out != "5" {
		t.Errorf("after kubectl scale: replicas = %q, want 5", out)
	}
}
