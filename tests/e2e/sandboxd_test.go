package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	sandboxv1beta1 "github.com/agentsandbox/reconciler/api/v1beta1"
	sdk "github.com/agentsandbox/reconciler/dataplane/client"
	"github.com/agentsandbox/reconciler/dataplane/sandboxd/processpb"
	"github.com/agentsandbox/reconciler/localcluster/standin"
	"github.com/agentsandbox/reconciler/tests/cluster"
)

// TestSandboxdOnLocalCluster: a sandbox Pod of the local cluster serves
// sandboxd next to the legacy protocol. Through one client-go port-forward
// to its ports 8888, 8080 and 9090: PUT and GET a file on the REST API,
// Execute `echo hi` on the gRPC service, and the file is the one the legacy
// protocol sees; a foreign Host is refused on REST. The SDK's sandboxd transport runs a command and round-trips
// a file; `kubectl sandbox exec -t` gets a real terminal. It logs the
// medians of `echo hi` through the port-forward: legacy POST /execute
// against sandboxd Start's first output and Execute (no timing assertion).
func TestSandboxdOnLocalCluster(t *testing.T) {
	if cluster.UseKind() {
		t.Skip("the stand-in kubelet serves the kwok cluster's fake Pods; kind runs them for real")
	}
	c := newClient(t)
	ns := namespace(t, c)
	key := types.NamespacedName{Namespace: ns, Name: "sbd"}
	if err := c.Create(context.Background(), sandbox(ns, "sbd")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, time.Minute, "Ready", readyIs(c, key, metav1.ConditionTrue, sandboxv1beta1.ReasonDependenciesReady))
	forward(t, local.Config, ns, "sbd") // the runtime answers
	ports, stop, err := openForwardPorts(local.Config, ns, "sbd", standin.RuntimePort, standin.SandboxdRESTPort, standin.SandboxdGRPCPort)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	legacy := fmt.Sprintf("http://127.0.0.1:%d", ports[standin.RuntimePort])
	rest := fmt.Sprintf("http://127.0.0.1:%d", ports[standin.SandboxdRESTPort])
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	req, _ := http.NewRequestWithContext(ctx, http.MethodPut, rest+"/v1/files/dir%2Fe2e.txt?mode=0600", strings.NewReader("through 8080"))
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("PUT /v1/files through the port-forward: %v %v", resp, err)
	}
	_ = resp.Body.Close()
	if got := httpGet(t, rest+"/v1/files/dir/e2e.txt"); got != "through 8080" {
		t.Fatalf("GET /v1/files/dir/e2e.txt = %q", got)
	}
	if got, err := download(legacy, "dir/e2e.txt"); err != nil || got != "through 8080" {
		t.Fatalf("the legacy protocol reads %q, %v", got, err)
	}
	// The stand-in's runtime has --allowed-hosts: sandboxd's REST API, like
	// the legacy protocol, refuses a Host DNS rebinding would send.
	req, _ = http.NewRequestWithContext(ctx, http.MethodPut, rest+"/v1/files/rebound.txt", strings.NewReader("x"))
	req.Host = "attacker.example"
	if resp, err = http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusForbidden {
		t.Fatalf("PUT /v1/files with Host attacker.example: %v %v, want 403", resp, err)
	}
	_ = resp.Body.Close()

	cc, err := grpc.NewClient(fmt.Sprintf("127.0.0.1:%d", ports[standin.SandboxdGRPCPort]), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cc.Close() }()
	pc := processpb.NewProcessServiceClient(cc)
	res, err := pc.Execute(ctx, &processpb.ExecuteRequest{Config: &processpb.ProcessConfig{Command: []string{"echo", "hi"}}})
	if err != nil || string(res.GetStdout()) != "hi\n" || res.GetExitCode() != 0 {
		t.Fatalf("Execute echo hi through the port-forward = %v, %v", res, err)
	}

	// The SDK's sandboxd transport (its own port-forward to 8080 and 9090).
	sc, err := sdk.New(local.Config, sdk.WithSandboxd())
	if err != nil {
		t.Fatal(err)
	}
	sb, err := sc.Open(ctx, ns, "sbd")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sb.Close(context.Background()) }()
	if r, err := sb.Run(ctx, "echo hi from the SDK"); err != nil || r.Stdout != "hi from the SDK\n" || r.ExitCode != 0 {
		t.Fatalf("SDK Run over sandboxd = %+v, %v", r, err)
	}
	if err := sb.Write(ctx, "sdk/round.txt", strings.NewReader("round trip")); err != nil {
		t.Fatal(err)
	}
	checkFile(ctx, t, sb, "sdk/round.txt", "round trip")

	// kubectl sandbox exec -t: a PTY in the sandbox (80x24 when the local
	// side is no terminal), through sandboxd's Start.
	cli := filepath.Join(buildCLI(t), "kubectl-sandbox")
	out, err := exec.CommandContext(ctx, cli, "exec", "-t", "--kubeconfig", local.Kubeconfig, "-n", ns, "sbd", "--", "sh", "-c", "tty >/dev/null && stty size").CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "24 80" {
		t.Fatalf("kubectl sandbox exec -t stty size = %q, %v; want a terminal of 24 rows and 80 columns", out, err)
	}

	measureFirstOutput(ctx, t, legacy, pc)
}

func httpGet(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s %s", url, resp.Status, b)
	}
	return string(b)
}

// measureFirstOutput logs the median latency of `echo hi` through the
// cluster's port-forward: the legacy POST /execute (the whole answer),
// sandboxd Start until its first output, and sandboxd Execute.
func measureFirstOutput(ctx context.Context, t *testing.T, legacy string, pc processpb.ProcessServiceClient) {
	const n = 25
	var viaLegacy, viaStart, viaExecute []time.Duration
	for range n {
		begin := time.Now()
		if r, err := execute(legacy, "echo hi"); err != nil || r.Stdout != "hi\n" {
			t.Fatalf("legacy /execute: %+v, %v", r, err)
		}
		viaLegacy = append(viaLegacy, time.Since(begin))

		begin = time.Now()
		stream, err := pc.Start(ctx, &processpb.StartRequest{Config: &processpb.ProcessConfig{Command: []string{"echo", "hi"}}})
		if err != nil {
			t.Fatal(err)
		}
		for first := false; !first; {
			ev, err := stream.Recv()
			if err != nil {
				t.Fatalf("Start: %v", err)
			}
			if len(ev.GetStdout()) > 0 {
				viaStart = append(viaStart, time.Since(begin))
				first = true
			}
		}
		for {
			if _, err := stream.Recv(); err != nil {
				break
			}
		}

		begin = time.Now()
		if _, err := pc.Execute(ctx, &processpb.ExecuteRequest{Config: &processpb.ProcessConfig{Command: []string{"echo", "hi"}}}); err != nil {
			t.Fatal(err)
		}
		viaExecute = append(viaExecute, time.Since(begin))
	}
	median := func(d []time.Duration) time.Duration { slices.Sort(d); return d[len(d)/2].Round(10 * time.Microsecond) }
	t.Logf("echo hi through the port-forward, median of %d: legacy POST /execute %s; sandboxd Start first output %s; sandboxd Execute %s",
		n, median(viaLegacy), median(viaStart), median(viaExecute))
}
