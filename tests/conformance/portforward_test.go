package conformance

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"
)

// The router as upstream's SDKs find it in their port-forward modes
// (DATAPLANE.md, "How upstream's SDKs find the router").
const (
	pfRouterService   = "sandbox-router-svc"
	pfRouterPort      = 8080
	pfRouterNamespace = "agent-sandbox-system" // the Python SDK's default router_namespace
)

// pfClientset is a typed client of the suite's cluster.
func pfClientset(t testing.TB) kubernetes.Interface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(suite.Config)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// pfGoSDKRouterPod resolves the router Pod as upstream's Go SDK does in its
// default mode: the EndpointSlices labelled
// kubernetes.io/service-name=sandbox-router-svc in the sandbox's namespace,
// the first endpoint not marked unready that has a targetRef, its Pod name.
// The SDK does not retry; neither does this, once the slice exists.
func pfGoSDKRouterPod(t testing.TB, cs kubernetes.Interface, ns string) string {
	t.Helper()
	var pod string
	eventually(t, 30*time.Second, "an EndpointSlice of "+pfRouterService+" in "+ns, func() error {
		slices, err := cs.DiscoveryV1().EndpointSlices(ns).List(context.Background(),
			metav1.ListOptions{LabelSelector: "kubernetes.io/service-name=" + pfRouterService})
		if err != nil {
			return err
		}
		for _, s := range slices.Items {
			for _, ep := range s.Endpoints {
				if ep.Conditions.Ready != nil && !*ep.Conditions.Ready {
					continue
				}
				if ep.TargetRef != nil && ep.TargetRef.Name != "" {
					pod = ep.TargetRef.Name
					return nil
				}
			}
		}
		return fmt.Errorf("no ready endpoints for %s in namespace %s", pfRouterService, ns)
	})
	return pod
}

// pfKubectlServicePod resolves `kubectl port-forward svc/NAME PORT` as
// kubectl does: the Service's selector picks the Pods, the first running
// one (kubectl prefers Ready ones) is forwarded to, and the Service port is
// translated to the container port its targetPort names.
func pfKubectlServicePod(t testing.TB, cs kubernetes.Interface, ns, name string, port int) (string, int) {
	t.Helper()
	svc, err := cs.CoreV1().Services(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("services %q: %v", name, err) // what the Python SDK's kubectl reported before
	}
	var pod *corev1.Pod
	eventually(t, 30*time.Second, "a ready pod of service "+ns+"/"+name, func() error {
		pods, err := cs.CoreV1().Pods(ns).List(context.Background(),
			metav1.ListOptions{LabelSelector: labels.SelectorFromSet(svc.Spec.Selector).String()})
		if err != nil {
			return err
		}
		for i := range pods.Items {
			p := &pods.Items[i]
			if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil && podReady(p) {
				pod = p
				return nil
			}
		}
		return fmt.Errorf("no running pod selected by %v", svc.Spec.Selector)
	})
	for _, sp := range svc.Spec.Ports {
		if int(sp.Port) != port {
			continue
		}
		if sp.TargetPort.Type == intstr.Int {
			return pod.Name, sp.TargetPort.IntValue()
		}
		for _, c := range pod.Spec.Containers {
			for _, cp := range c.Ports {
				if cp.Name == sp.TargetPort.StrVal {
					return pod.Name, int(cp.ContainerPort)
				}
			}
		}
		t.Fatalf("service %s/%s: no container port named %q in pod %s", ns, name, sp.TargetPort.StrVal, pod.Name)
	}
	t.Fatalf("service %s/%s has no port %d", ns, name, port)
	return "", 0
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// pfClient is the wire shape of one upstream SDK (the builders of
// wire_test.go): its headers, its JSON and its multipart upload.
type pfClient struct {
	name string
	// request is one request to the sandbox c, as the SDK writes it.
	request func(c *Claimed, method, target, contentType string, body []byte) Wire
	// execute is the body of POST /execute running command.
	execute func(command string) []byte
	// multipart is the body of an upload.
	multipart func(boundary, name string, content []byte) []byte
}

// pfGoSDK is upstream's Go SDK over its tunnel to the router: net/http's
// headers with the router headers, plus X-Sandbox-Pod-Ip (status.podIPs[0])
// in its sorted place, as the SDK sends it when it knows the Pod's IP.
func pfGoSDK(podIP string) pfClient {
	return pfClient{name: "go-sdk",
		request: func(c *Claimed, method, target, contentType string, body []byte) Wire {
			var h []string
			for _, line := range goSDKHeaders(c.Sandbox, c.Namespace, contentType, body, "60") {
				h = append(h, line)
				if podIP != "" && strings.HasPrefix(line, "X-Sandbox-Namespace: ") {
					h = append(h, "X-Sandbox-Pod-Ip: "+podIP)
				}
			}
			return Wire{Method: method, Target: target, Headers: h, Body: body}
		},
		execute:   func(command string) []byte { return []byte(`{"command":"` + command + `"}`) },
		multipart: goMultipart,
	}
}

// pfPythonSDK is upstream's Python SDK through its local tunnel.
var pfPythonSDK = pfClient{name: "python-sdk",
	request: func(c *Claimed, method, target, contentType string, body []byte) Wire {
		return Wire{Method: method, Target: target, Headers: pythonSDKHeaders(c.Sandbox, c.Namespace, contentType, body), Body: body}
	},
	execute:   func(command string) []byte { return []byte(`{"command": "` + command + `"}`) },
	multipart: pythonMultipart,
}

// pfBoundary is the multipart boundary of the replayed uploads (the SDKs
// draw a random one; the runtime must not care which).
const pfBoundary = "5a1f0c3e9b7d2468ace13579bdf02468ace13579bdf02468ace13579bdf0"

// pfLegacy replays upstream's legacy calls through a router reached at addr
// (a port-forward's local end) and checks the runtime's exact answers:
// run, write (multipart upload), read, exists and list, in the order an
// SDK user makes them. It returns how long the first command took.
func pfLegacy(t *testing.T, addr string, c *Claimed, sdk pfClient) time.Duration {
	t.Helper()
	file := "pf-" + sdk.name + ".txt"
	content := []byte("port-forward " + sdk.name + " " + c.Sandbox + "\n")

	start := time.Now()
	var r Reply
	// kwok marks a Pod Ready before its runtime serves (README): the first
	// call may meet a runtime still starting (502, which the SDKs retry).
	eventually(t, time.Minute, sdk.name+": the first command through the router", func() error {
		var err error
		r, err = trySend(addr, sdk.request(c, http.MethodPost, "/execute", "application/json", sdk.execute("echo hello")))
		if err == nil && r.Status == http.StatusBadGateway {
			return fmt.Errorf("%w: %d %s", errStatus, r.Status, r.Body)
		}
		return err
	})
	first := time.Since(start)
	expect(t, sdk.name+" POST /execute", r, http.StatusOK, map[string]string{"Content-Type": "application/json"},
		`{"stdout":"hello\n","stderr":"","exit_code":0}`)

	r = send(t, addr, sdk.request(c, http.MethodPost, "/upload", "multipart/form-data; boundary="+pfBoundary,
		sdk.multipart(pfBoundary, file, content)))
	expect(t, sdk.name+" POST /upload", r, http.StatusOK, nil, `{"message":"File '`+file+`' uploaded successfully."}`)

	r = send(t, addr, sdk.request(c, http.MethodGet, "/download/"+file, "", nil))
	expect(t, sdk.name+" GET /download", r, http.StatusOK, map[string]string{"Content-Type": "application/octet-stream"}, string(content))

	r = send(t, addr, sdk.request(c, http.MethodGet, "/exists/"+file, "", nil))
	expect(t, sdk.name+" GET /exists", r, http.StatusOK, map[string]string{"Content-Type": "application/json"},
		`{"path":"`+file+`","exists":true}`)
	r = send(t, addr, sdk.request(c, http.MethodGet, "/exists/pf-missing.txt", "", nil))
	expect(t, sdk.name+" GET /exists (missing)", r, http.StatusOK, nil, `{"path":"pf-missing.txt","exists":false}`)

	// "." percent-encoded as the Go SDK encodes it.
	r = send(t, addr, sdk.request(c, http.MethodGet, "/list/%2E", "", nil))
	entry := regexp.MustCompile(`\{"name":"` + regexp.QuoteMeta(file) + `","size":` + strconv.Itoa(len(content)) +
		`,"type":"file","mod_time":[0-9]+(\.[0-9]+)?\}`)
	if r.Status != http.StatusOK || !entry.Match(r.Body) {
		t.Errorf("%s GET /list/%%2E: %d %s; want 200 with %s", sdk.name, r.Status, r.Body, entry)
	}
	return first
}

// TestPortForwardGoSDKDefaultMode replays upstream's Go SDK in its default
// mode against what `make run` runs: claim a sandbox, find the router Pod
// through the EndpointSlices of sandbox-router-svc in the sandbox's own
// namespace, port-forward (SPDY, client-go) to that Pod's 8080, and send
// the legacy calls with the router headers.
func TestPortForwardGoSDKDefaultMode(t *testing.T) {
	cs := pfClientset(t)
	c := claimSandbox(t)
	sb, err := cs.CoreV1().Pods(c.Namespace).Get(context.Background(), c.Pod, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	routerPod := pfGoSDKRouterPod(t, cs, c.Namespace)
	pod, err := cs.CoreV1().Pods(c.Namespace).Get(context.Background(), routerPod, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the endpoint's targetRef %s/%s: %v", c.Namespace, routerPod, err)
	}
	if pod.Labels["app"] != "sandbox-router" || !podReady(pod) {
		t.Errorf("router pod %s/%s: labels %v, ready %v; want app=sandbox-router and Ready", c.Namespace, routerPod, pod.Labels, podReady(pod))
	}
	local := forwardPod(t, c.Namespace, routerPod, pfRouterPort)
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(local[pfRouterPort]))
	connected := time.Since(start)
	first := pfLegacy(t, addr, c, pfGoSDK(sb.Status.PodIP))
	t.Logf("go-sdk port-forward mode: open (claim to Ready) %s, router lookup + port-forward %s, first command %s; open to first command %s",
		c.Opened.Round(time.Millisecond), connected.Round(time.Millisecond), first.Round(time.Millisecond),
		(c.Opened + connected + first).Round(time.Millisecond))
}

// TestPortForwardPythonTunnel replays upstream's Python SDK's local tunnel:
// `kubectl port-forward svc/sandbox-router-svc <local>:8080 -n
// agent-sandbox-system`, resolved as kubectl resolves svc/NAME, then the
// legacy calls with the Python SDK's headers.
func TestPortForwardPythonTunnel(t *testing.T) {
	cs := pfClientset(t)
	c := claimSandbox(t)
	start := time.Now()
	pod, port := pfKubectlServicePod(t, cs, pfRouterNamespace, pfRouterService, pfRouterPort)
	if port != pfRouterPort {
		t.Errorf("svc/%s port %d leads to container port %d, want %d", pfRouterService, pfRouterPort, port, pfRouterPort)
	}
	local := forwardPod(t, pfRouterNamespace, pod, port)
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(local[port]))
	connected := time.Since(start)
	first := pfLegacy(t, addr, c, pfPythonSDK)
	t.Logf("python-sdk tunnel mode: open (claim to Ready) %s, service lookup + port-forward %s, first command %s; open to first command %s",
		c.Opened.Round(time.Millisecond), connected.Round(time.Millisecond), first.Round(time.Millisecond),
		(c.Opened + connected + first).Round(time.Millisecond))
}

// TestPortForwardRouterEveryNamespace: a namespace made after the cluster
// came up gets sandbox-router-svc too, with a ready endpoint the Go SDK can
// use, and the cluster's own namespaces get none.
func TestPortForwardRouterEveryNamespace(t *testing.T) {
	cs := pfClientset(t)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "pf-team-"}}
	ns, err := cs.CoreV1().Namespaces().Create(context.Background(), ns, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		uid := ns.UID
		_ = cs.CoreV1().Namespaces().Delete(context.Background(), ns.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	})
	pod := pfGoSDKRouterPod(t, cs, ns.Name)
	local := forwardPod(t, ns.Name, pod, pfRouterPort)
	// The router itself answers: its own /healthz, and upstream's error for
	// a sandbox that does not exist.
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(local[pfRouterPort]))
	r := send(t, addr, Wire{Method: "GET", Target: "/healthz"})
	expect(t, "GET /healthz through "+ns.Name+"/"+pod, r, 200, nil, `{"status":"ok"}`)
	for _, sys := range []string{"kube-system", "kube-public", "kube-node-lease"} {
		if _, err := cs.CoreV1().Services(sys).Get(context.Background(), pfRouterService, metav1.GetOptions{}); err == nil {
			t.Errorf("%s has a %s", sys, pfRouterService)
		}
	}
}

// TestPortForwardPythonTunnelKubectl runs the Python SDK's tunnel command
// itself, with the kubectl on PATH (skipped without one): `kubectl
// port-forward svc/sandbox-router-svc <local>:8080 -n agent-sandbox-system`.
func TestPortForwardPythonTunnelKubectl(t *testing.T) {
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("no kubectl on PATH")
	}
	c := claimSandbox(t)
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	cmd := exec.Command(kubectl, "--kubeconfig", suite.Kubeconfig, "port-forward", "svc/"+pfRouterService,
		fmt.Sprintf("%d:%d", port, pfRouterPort), "-n", pfRouterNamespace)
	cmd.Stdout, cmd.Stderr = &pfSyncWriter{w: &out}, &pfSyncWriter{w: &out}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	eventually(t, 30*time.Second, "kubectl port-forward listening", func() error {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return err
		}
		return conn.Close()
	})
	pfLegacy(t, addr, c, pfPythonSDK)
	if t.Failed() {
		pfWriteMu.Lock()
		t.Logf("kubectl output:\n%s", out.String())
		pfWriteMu.Unlock()
	}
}

// pfSyncWriter serializes the writes of a process's stdout and stderr.
type pfSyncWriter struct {
	w io.Writer
}

var pfWriteMu sync.Mutex

func (s *pfSyncWriter) Write(b []byte) (int, error) {
	pfWriteMu.Lock()
	defer pfWriteMu.Unlock()
	return s.w.Write(b)
}

// pfDialAs port-forwards to port of ns/pod as user (impersonated), as the
// Go SDK's tunnel does, and returns the local address or the API server's
// refusal.
func pfDialAs(t testing.TB, user, ns, pod string, port int) (string, error) {
	t.Helper()
	cfg := rest.CopyConfig(suite.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return "", err
	}
	transport, upgrader, err := spdy.RoundTripperFor(cfg)
	if err != nil {
		return "", err
	}
	u := cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(ns).Name(pod).SubResource("portforward").URL()
	dialer := spdy.NewDialer(upgrader, &http.Client{Transport: transport}, http.MethodPost, u)
	stop, ready := make(chan struct{}), make(chan struct{})
	pf, err := portforward.NewOnAddresses(dialer, []string{"127.0.0.1"}, []string{"0:" + strconv.Itoa(port)}, stop, ready, io.Discard, io.Discard)
	if err != nil {
		return "", err
	}
	errc := make(chan error, 1)
	go func() { errc <- pf.ForwardPorts() }()
	select {
	case <-ready:
	case err := <-errc:
		return "", err
	case <-time.After(30 * time.Second):
		close(stop)
		return "", errors.New("port-forward not ready after 30s")
	}
	t.Cleanup(func() { close(stop) })
	ports, err := pf.GetPorts()
	if err != nil {
		return "", err
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(int(ports[0].Local))), nil
}

// TestPortForwardRouterNeedsPodsPortforward plays the attacker: reaching
// the router through sandbox-router-svc takes create on pods/portforward
// in that namespace, which the API server checks for each caller. A user
// who may only view the sandbox's namespace, or who may edit another
// namespace, gets the API server's 403 and reaches nothing; an editor of
// the namespace (edit grants pods/portforward and sandboxes/exec alike)
// reaches the sandbox.
func TestPortForwardRouterNeedsPodsPortforward(t *testing.T) {
	cs := pfClientset(t)
	c := claimSandbox(t)
	other := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "pf-other-"}}
	other, err := cs.CoreV1().Namespaces().Create(context.Background(), other, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		uid := other.UID
		_ = cs.CoreV1().Namespaces().Delete(context.Background(), other.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	})
	suffix := strings.TrimPrefix(other.Name, "pf-other-")
	viewer, editor, stranger := "pf-viewer-"+suffix, "pf-editor-"+suffix, "pf-stranger-"+suffix
	for _, b := range []struct{ ns, user, role string }{{c.Namespace, viewer, "view"}, {c.Namespace, editor, "edit"}, {other.Name, stranger, "edit"}} {
		rb := &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: b.user, Namespace: b.ns},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: b.role},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: b.user}},
		}
		rb, err := cs.RbacV1().RoleBindings(b.ns).Create(context.Background(), rb, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			uid := rb.UID
			_ = cs.RbacV1().RoleBindings(rb.Namespace).Delete(context.Background(), rb.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
		})
	}
	routerPod := pfGoSDKRouterPod(t, cs, c.Namespace)
	central, _ := pfKubectlServicePod(t, cs, pfRouterNamespace, pfRouterService, pfRouterPort)
	for _, a := range []struct{ user, ns, pod string }{
		{viewer, c.Namespace, routerPod},
		{stranger, c.Namespace, routerPod},
		{stranger, pfRouterNamespace, central},
		{editor, pfRouterNamespace, central},
	} {
		if _, err := pfDialAs(t, a.user, a.ns, a.pod, pfRouterPort); err == nil || !strings.Contains(err.Error(), "403") && !strings.Contains(strings.ToLower(err.Error()), "forbidden") {
			t.Errorf("%s port-forwarding to %s/%s: %v, want the API server's 403", a.user, a.ns, a.pod, err)
		}
	}
	// RBAC is cached by nothing here: the binding holds at once.
	var addr string
	eventually(t, 10*time.Second, "the editor's port-forward", func() error {
		var err error
		addr, err = pfDialAs(t, editor, c.Namespace, routerPod, pfRouterPort)
		return err
	})
	pfLegacy(t, addr, c, pfGoSDK(""))
}
