package main

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/agentsandbox/reconciler/dataplane/sandboxd/processpb"
)

func listen(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

// One process serves the legacy protocol, sandboxd's REST API and its gRPC
// service, on the same base directory; on shutdown a Start stream still
// running past the grace period has its program killed.
func TestServeAllThreeProtocols(t *testing.T) {
	o := parse(t, nil, "--base-dir="+t.TempDir(), "--shutdown-timeout=300ms")
	l := listeners{legacy: listen(t), rest: listen(t), grpc: listen(t)}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serve(ctx, o, l, slog.New(slog.DiscardHandler)) }()

	req, _ := http.NewRequest(http.MethodPut, "http://"+l.rest.Addr().String()+"/v1/files/from-rest.txt", strings.NewReader("shared"))
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("sandboxd PUT: %v %v", resp, err)
	}
	_ = resp.Body.Close()
	resp, err = http.Get("http://" + l.legacy.Addr().String() + "/download/from-rest.txt")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if string(body) != "shared" {
		t.Fatalf("legacy download of a file PUT through sandboxd: %d %q", resp.StatusCode, body)
	}

	cc, err := grpc.NewClient(l.grpc.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cc.Close() }()
	pc := processpb.NewProcessServiceClient(cc)
	callCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := pc.Execute(callCtx, &processpb.ExecuteRequest{Config: &processpb.ProcessConfig{Command: []string{"cat", "from-rest.txt"}}})
	if err != nil || string(res.GetStdout()) != "shared" {
		t.Fatalf("Execute: %v %v", res, err)
	}
	stream, err := pc.Start(callCtx, &processpb.StartRequest{Config: &processpb.ProcessConfig{Command: []string{"sleep", "100"}}})
	if err != nil {
		t.Fatal(err)
	}
	first, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	pid := int(first.GetInit().GetProcessId())

	stop()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("serve: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("serve did not return after shutdown")
	}
	for deadline := time.Now().Add(5 * time.Second); syscall.Kill(pid, 0) == nil; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the Start stream's program %d outlived the shutdown", pid)
		}
	}
}

func TestEmptyAddressTurnsAProtocolOff(t *testing.T) {
	o := parse(t, nil, "--sandboxd-rest-address=", "--sandboxd-grpc-address=")
	if o.restAddr != "" || o.grpcAddr != "" || o.validate() != nil {
		t.Fatalf("%+v %v", o, o.validate())
	}
	if d := parse(t, nil); d.restAddr != ":8080" || d.grpcAddr != ":9090" || d.envdAddr != ":49983" {
		t.Fatalf("defaults: %q %q %q", d.restAddr, d.grpcAddr, d.envdAddr)
	}
	o = parse(t, map[string]string{"SANDBOXD_REST_ADDRESS": "off"})
	if err := o.validate(); err != nil || o.restAddr != "" || o.grpcAddr != ":9090" {
		t.Fatalf("SANDBOXD_REST_ADDRESS=off: %q %q %v", o.restAddr, o.grpcAddr, err)
	}
	o = parse(t, nil, "--listen-address=", "--sandboxd-rest-address=", "--sandboxd-grpc-address=off", "--envd-address=off")
	if err := o.validate(); err == nil || !strings.Contains(err.Error(), "nothing to serve") {
		t.Fatalf("all off: %v", err)
	}
}

// A taken address stops the runtime with a message that names the flag.
func TestTakenAddressNamesItsFlag(t *testing.T) {
	taken := listen(t)
	defer func() { _ = taken.Close() }()
	o := parse(t, nil, "--base-dir="+t.TempDir(), "--listen-address=127.0.0.1:0", "--sandboxd-grpc-address=off", "--envd-address=off",
		"--sandboxd-rest-address="+taken.Addr().String())
	if err := o.validate(); err != nil {
		t.Fatal(err)
	}
	err := run(context.Background(), o, slog.New(slog.DiscardHandler))
	if err == nil || !strings.Contains(err.Error(), "--sandboxd-rest-address="+taken.Addr().String()) || !strings.Contains(err.Error(), "off") {
		t.Fatalf("run with a taken REST address: %v", err)
	}
}
