package conformance

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"
	"sigs.k8s.io/controller-runtime/pkg/client"

	extv1beta1 "github.com/agentsandbox/reconciler/api/extensions/v1beta1"
	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
)

// Claimed is a sandbox the suite claimed from the sample warm pool, as
// upstream's Go SDK opens one.
type Claimed struct {
	Namespace string
	// Claim is the SandboxClaim's generated name, Sandbox the Sandbox's
	// (status.sandbox.name) and UID its UID, Pod the Pod's name (the
	// annotation agents.x-k8s.io/pod-name, else the Sandbox's name).
	Claim, Sandbox, Pod string
	UID                 types.UID
	// Opened is how long creating the claim until the Sandbox was Ready took.
	Opened time.Duration
}

// claimSandbox claims a sandbox from the sample warm pool as upstream's Go
// SDK does: a SandboxClaim with generateName "sandbox-claim-",
// spec.warmPoolRef and the annotation
// agents.x-k8s.io/client-first-requested-at; then one watch for the
// claim's status.sandbox.name and one for the Sandbox's Ready=True. The
// claim is deleted (UID precondition) when the test ends. A claim with env
// gets a sandbox of its own, started with it (no warm member can take it).
func claimSandbox(t testing.TB, env ...extv1beta1.EnvVar) *Claimed {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ns := suite.Namespace
	start := time.Now()
	claim := &extv1beta1.SandboxClaim{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: "sandbox-claim-", Namespace: ns,
			Annotations: map[string]string{extv1beta1.AnnotationClientFirstRequestedAt: start.UTC().Format(time.RFC3339Nano)},
		},
		Spec: extv1beta1.SandboxClaimSpec{WarmPoolRef: extv1beta1.SandboxWarmPoolRef{Name: samplePool}, Env: env},
	}
	if err := suite.Client.Create(ctx, claim); err != nil {
		t.Fatalf("creating a SandboxClaim on %s/%s: %v", ns, samplePool, err)
	}
	t.Cleanup(func() {
		uid := claim.UID
		err := suite.Client.Delete(context.Background(), claim, client.Preconditions{UID: &uid})
		if client.IgnoreNotFound(err) != nil {
			t.Errorf("deleting claim %s: %v", claim.Name, err)
		}
	})
	c := &Claimed{Namespace: ns, Claim: claim.Name}
	wc, err := client.NewWithWatch(suite.Config, client.Options{Scheme: suite.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	// status.sandbox.name, from one watch of the claim.
	if err := watchUntil(ctx, wc, &extv1beta1.SandboxClaimList{}, ns, claim.Name, func(o client.Object) bool {
		c.Sandbox = o.(*extv1beta1.SandboxClaim).Status.Sandbox.Name
		return c.Sandbox != ""
	}); err != nil {
		t.Fatalf("claim %s: waiting for status.sandbox.name: %v", claim.Name, err)
	}
	// The Sandbox's Ready condition, from one watch of the Sandbox.
	if err := watchUntil(ctx, wc, &sandboxv1beta1.SandboxList{}, ns, c.Sandbox, func(o client.Object) bool {
		sb := o.(*sandboxv1beta1.Sandbox)
		if !metaReady(sb.Status.Conditions) {
			return false
		}
		c.UID, c.Pod = sb.UID, sb.Annotations[sandboxv1beta1.AnnotationPodName]
		if c.Pod == "" {
			c.Pod = sb.Name
		}
		return true
	}); err != nil {
		t.Fatalf("claim %s: waiting for Sandbox %s Ready: %v", claim.Name, c.Sandbox, err)
	}
	c.Opened = time.Since(start)
	t.Logf("claimed %s/%s: Sandbox %s (uid %s), Pod %s, open took %s", ns, c.Claim, c.Sandbox, c.UID, c.Pod, c.Opened.Round(time.Millisecond))
	return c
}

func metaReady(conds []metav1.Condition) bool {
	for _, c := range conds {
		if c.Type == sandboxv1beta1.ConditionReady && c.Status == metav1.ConditionTrue {
			return true
		}
	}
	return false
}

// watchUntil watches the one object named name (a field selector on
// metadata.name) until done accepts it.
func watchUntil(ctx context.Context, wc client.WithWatch, list client.ObjectList, ns, name string, done func(client.Object) bool) error {
	for ctx.Err() == nil {
		w, err := wc.Watch(ctx, list, client.InNamespace(ns), client.MatchingFields{"metadata.name": name})
		if err != nil {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		for ev := range w.ResultChan() {
			if o, ok := ev.Object.(client.Object); ok && ev.Type != "ERROR" {
				if ev.Type == "DELETED" {
					w.Stop()
					return fmt.Errorf("%s was deleted", name)
				}
				if done(o) {
					w.Stop()
					return nil
				}
			}
		}
		w.Stop()
	}
	return ctx.Err()
}

// forwardPod opens one client-go port-forward to ports of a Pod (as
// upstream's Go SDK's pod tunnel does), each on a free loopback port, and
// returns the local port of each; it is closed when the test ends.
func forwardPod(t testing.TB, ns, pod string, ports ...int) map[int]int {
	t.Helper()
	cs, err := kubernetes.NewForConfig(suite.Config)
	if err != nil {
		t.Fatal(err)
	}
	transport, upgrader, err := spdy.RoundTripperFor(suite.Config)
	if err != nil {
		t.Fatal(err)
	}
	u := cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(ns).Name(pod).SubResource("portforward").URL()
	dialer := spdy.NewDialer(upgrader, &http.Client{Transport: transport}, http.MethodPost, u)
	specs := make([]string, len(ports))
	for i, p := range ports {
		specs[i] = "0:" + strconv.Itoa(p)
	}
	stop, ready := make(chan struct{}), make(chan struct{})
	pf, err := portforward.NewOnAddresses(dialer, []string{"127.0.0.1"}, specs, stop, ready, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { errc <- pf.ForwardPorts() }()
	select {
	case <-ready:
	case err := <-errc:
		t.Fatalf("port-forward to %s/%s: %v", ns, pod, err)
	case <-time.After(30 * time.Second):
		close(stop)
		t.Fatalf("port-forward to %s/%s: not ready after 30s", ns, pod)
	}
	t.Cleanup(func() { close(stop) })
	got, err := pf.GetPorts()
	if err != nil {
		t.Fatal(err)
	}
	local := map[int]int{}
	for _, p := range got {
		local[int(p.Remote)] = int(p.Local)
	}
	return local
}

// Wire is one HTTP/1.1 exchange, written on the connection exactly as an
// SDK sends it: the request line, the headers in the SDK's order and
// spelling, and the body.
type Wire struct {
	Method, Target string // Target is the request-target, already encoded
	// Headers are "Name: value" lines after Host (written from the
	// address), in order; Content-Length is added from Body when they
	// carry none.
	Headers []string
	Body    []byte
	// Chunked sends the body with Transfer-Encoding: chunked (a streamed
	// upload) instead of Content-Length.
	Chunked bool
}

// Reply is the answer to a Wire request.
type Reply struct {
	Status int
	Header http.Header
	Body   []byte
}

// send writes w to addr (host:port) on a fresh connection, byte for byte,
// and reads the answer.
func send(t testing.TB, addr string, w Wire) Reply {
	t.Helper()
	r, err := trySend(addr, w)
	if err != nil {
		t.Fatalf("%s %s to %s: %v", w.Method, w.Target, addr, err)
	}
	return r
}

func trySend(addr string, w Wire) (Reply, error) {
	conn, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		return Reply{}, err
	}
	defer func() { _ = conn.Close() }()
	_ = conn.SetDeadline(time.Now().Add(2 * time.Minute))
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: %s\r\n", w.Method, w.Target, addr)
	hasLength := false
	for _, h := range w.Headers {
		hasLength = hasLength || strings.HasPrefix(strings.ToLower(h), "content-length:")
		b.WriteString(h + "\r\n")
	}
	switch {
	case w.Chunked:
		b.WriteString("Transfer-Encoding: chunked\r\n\r\n")
		if len(w.Body) > 0 {
			fmt.Fprintf(&b, "%x\r\n%s\r\n", len(w.Body), w.Body)
		}
		b.WriteString("0\r\n\r\n")
	default:
		if !hasLength && w.Body != nil {
			fmt.Fprintf(&b, "Content-Length: %d\r\n", len(w.Body))
		}
		b.WriteString("\r\n")
		b.Write(w.Body)
	}
	if _, err := conn.Write(b.Bytes()); err != nil {
		return Reply{}, err
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), &http.Request{Method: w.Method})
	if err != nil {
		return Reply{}, err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return Reply{}, err
	}
	return Reply{Status: resp.StatusCode, Header: resp.Header, Body: body}, nil
}

// expect checks a reply's status, the named headers (exact values; "" means
// absent) and its exact body.
func expect(t testing.TB, what string, r Reply, status int, headers map[string]string, body string) {
	t.Helper()
	var bad []string
	if r.Status != status {
		bad = append(bad, fmt.Sprintf("status %d, want %d", r.Status, status))
	}
	for k, v := range headers {
		if got := r.Header.Get(k); got != v {
			bad = append(bad, fmt.Sprintf("%s: %q, want %q", k, got, v))
		}
	}
	if string(r.Body) != body {
		bad = append(bad, fmt.Sprintf("body %q, want %q", r.Body, body))
	}
	if len(bad) > 0 {
		t.Errorf("%s: %s", what, strings.Join(bad, "; "))
	}
}

// hostPort is the host:port of an http:// URL.
func hostPort(t testing.TB, rawURL string) string {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}

// eventually retries f every 100ms until it succeeds or timeout passes.
func eventually(t testing.TB, timeout time.Duration, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var err error
	for {
		if err = f(); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %s: %v", what, timeout, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

var errStatus = errors.New("unexpected status")

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port, nil
}
