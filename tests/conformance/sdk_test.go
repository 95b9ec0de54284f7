package conformance

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	sdk "github.com/agentsandbox/reconciler/dataplane/client"
	"github.com/agentsandbox/reconciler/localcluster/standin"
)

// TestOurSDKWithSandboxd: our Go SDK with WithSandboxd() opens a claimed
// sandbox (its own pod tunnel to 8080 and 9090), runs a command, writes,
// reads, lists and finds a file, and the file is the one a raw sandboxd
// GET over a tunnel of this test's own reads.
func TestOurSDKWithSandboxd(t *testing.T) {
	c := claimSandbox(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sc, err := sdk.New(suite.Config, sdk.WithSandboxd())
	if err != nil {
		t.Fatal(err)
	}
	begin := time.Now()
	sb, err := sc.Open(ctx, c.Namespace, c.Claim)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sb.Close(context.Background()) }()
	if sb.Name() != c.Sandbox {
		t.Fatalf("the SDK opened Sandbox %s; the claim holds %s", sb.Name(), c.Sandbox)
	}
	var r sdk.Result
	// The first command may meet a runtime that is still starting.
	eventually(t, time.Minute, "the SDK's first Run", func() error {
		r, err = sb.Run(ctx, "echo hi")
		return err
	})
	t.Logf("our SDK with WithSandboxd: Open -> first Run answered %s", time.Since(begin).Round(time.Millisecond))
	if r.Stdout != "hi\n" || r.Stderr != "" || r.ExitCode != 0 {
		t.Errorf("Run echo hi = %+v", r)
	}
	if err := sb.Write(ctx, "sdk/out.txt", strings.NewReader("from our SDK")); err != nil {
		t.Fatal(err)
	}
	rc, err := sb.Read(ctx, "sdk/out.txt")
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(rc)
	_ = rc.Close()
	if string(got) != "from our SDK" {
		t.Errorf("Read sdk/out.txt = %q", got)
	}
	entries, err := sb.List(ctx, "sdk")
	if err != nil || len(entries) != 1 || entries[0].Name != "out.txt" || entries[0].Size != int64(len("from our SDK")) {
		t.Errorf("List sdk = %+v, %v", entries, err)
	}
	if ok, err := sb.Exists(ctx, "sdk/out.txt"); err != nil || !ok {
		t.Errorf("Exists sdk/out.txt = %v, %v", ok, err)
	}
	if ok, err := sb.Exists(ctx, "sdk/none.txt"); err != nil || ok {
		t.Errorf("Exists sdk/none.txt = %v, %v", ok, err)
	}
	ports := forwardPod(t, c.Namespace, c.Pod, standin.SandboxdRESTPort)
	raw := send(t, "127.0.0.1:"+strconv.Itoa(ports[standin.SandboxdRESTPort]),
		Wire{Method: http.MethodGet, Target: "/v1/files/sdk%2Fout.txt", Headers: goSDKTunnelHeaders("", nil)})
	expect(t, "raw GET of the SDK's file", raw, http.StatusOK, map[string]string{"Content-Type": "application/octet-stream"}, "from our SDK")
}
