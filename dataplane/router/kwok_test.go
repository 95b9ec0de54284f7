package router

import (
	"context"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func kwokPortForward(ns, name string, forwards ...map[string]any) *unstructured.Unstructured {
	fws := make([]any, len(forwards))
	for i, f := range forwards {
		fws[i] = f
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kwok.x-k8s.io/v1alpha1", "kind": "PortForward",
		"spec": map[string]any{"forwards": fws},
	}}
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}

func target(address string, port int64, ports ...int64) map[string]any {
	f := map[string]any{"target": map[string]any{"address": address, "port": port}}
	if len(ports) > 0 {
		ps := make([]any, len(ports))
		for i, p := range ports {
			ps[i] = p
		}
		f["ports"] = ps
	}
	return f
}

func TestKwokTargets(t *testing.T) {
	k := newKwokForwards(true)
	k.Remember("uid-a", "team", "a")
	k.set(kwokPortForward("team", "a",
		target("127.0.0.1", 40000),                                               // every other port
		target("127.0.0.1", 40888, 8888),                                         // 8888 exactly, though listed second
		map[string]any{"ports": []any{int64(9090)}, "command": []any{"nc", "x"}}, // a command: never dialled
	))
	for _, tc := range []struct {
		port int
		want string
	}{{8888, "127.0.0.1:40888"}, {8080, "127.0.0.1:40000"}, {9090, "no forward found for port 9090"}} {
		got, err := k.target("uid-a", tc.port)
		if err != nil {
			got = err.Error()
		}
		if !strings.Contains(got, tc.want) {
			t.Errorf("port %d: %q; want %q", tc.port, got, tc.want)
		}
	}
	if _, err := k.target("uid-unknown", 8888); err == nil {
		t.Error("a Pod the router never routed to was dialled")
	}
	k.Remember("uid-b", "team", "b")
	if _, err := k.target("uid-b", 8888); err == nil || !notForwarded(err) {
		t.Errorf("a Pod without a PortForward yet: %v; want kwok's refusal, retried like one", err)
	}
	strict := newKwokForwards(false)
	strict.Remember("uid-a", "team", "a")
	strict.set(kwokPortForward("team", "a", target("127.0.0.1", 40888, 8888)))
	if _, err := strict.target("uid-a", 8888); err == nil {
		t.Error("a loopback target without --allow-local-addresses was allowed")
	}
	k.set(kwokPortForward("team", "a", target("169.254.169.254", 80, 8888)))
	if _, err := k.target("uid-a", 8888); err == nil {
		t.Error("a PortForward pointing at the metadata address was followed")
	}
	k.remove(kwokPortForward("team", "a"))
	if _, err := k.target("uid-a", 8888); err == nil {
		t.Error("a deleted PortForward still routes")
	}
}

// TestKwokTransport: a request routed to a Pod goes straight to the
// address its PortForward gives the port.
func TestKwokTransport(t *testing.T) {
	port := backendPort(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("served " + r.Host)) }))
	p, _ := strconv.ParseInt(port, 10, 64)
	k := newKwokForwards(true)
	k.set(kwokPortForward("team", "box", target("127.0.0.1", p, 8888)))
	r := newTestRouter(t, func(o *Options) {
		o.Transport = NewKwokTransport(k)
		o.Resolver = ResolverFunc(func(_ context.Context, target Target) (Endpoint, error) {
			return Endpoint{Namespace: "team", Sandbox: target.ID, Pod: "box", PodUID: "uid-box",
				IP: netip.MustParseAddr("10.0.0.7"), Port: target.Port, Source: SourceCache}, nil
		})
	})
	resp, body := do(t, r, http.MethodGet, "/", map[string]string{"X-Sandbox-ID": "box", "X-Sandbox-Namespace": "team"}, nil)
	if resp.StatusCode != http.StatusOK || body != "served 10.0.0.7:8888" {
		t.Errorf("through kwok's forward: %d %q; want the Pod's server, Host its pod IP and port", resp.StatusCode, body)
	}
	k.Forget("uid-box")
	if c, err := k.DialPod(context.Background(), "uid-box", 8888); err == nil {
		_ = c.Close()
		t.Error("a forgotten Pod was dialled")
	}
}
