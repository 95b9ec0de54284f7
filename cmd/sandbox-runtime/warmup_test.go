package main

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// lockedBuffer is a log sink safe for the server's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestServeWarmsUp: a runtime that requires a token and checks Host sends
// itself a health check and one command through its own guard at start,
// and says so; with --warm-up=false it sends nothing.
func TestServeWarmsUp(t *testing.T) {
	for _, on := range []bool{true, false} {
		o := parse(t, map[string]string{"SANDBOX_RUNTIME_TOKEN": "tok"}, "--base-dir="+t.TempDir(), "--allowed-hosts=localhost",
			"--warm-up="+map[bool]string{true: "true", false: "false"}[on])
		if err := o.validate(); err != nil {
			t.Fatal(err)
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		logs := &lockedBuffer{}
		ctx, stop := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- serve(ctx, o, listeners{legacy: ln}, slog.New(slog.NewTextHandler(logs, nil))) }()
		deadline := time.Now().Add(10 * time.Second)
		for on && !strings.Contains(logs.String(), "warmed up") && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if !on {
			time.Sleep(500 * time.Millisecond)
		}
		stop()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
		out := logs.String()
		if got := strings.Contains(out, "warmed up") && strings.Contains(out, "msg=execute"); got != on {
			t.Errorf("--warm-up=%t: warmed up and ran a command: %t; log:\n%s", on, got, out)
		}
		if strings.Contains(out, "warm-up") {
			t.Errorf("--warm-up=%t: a warm-up request failed:\n%s", on, out)
		}
	}
}

func TestLoopbackAddress(t *testing.T) {
	for in, want := range map[string]string{
		"[::]:8888": "127.0.0.1:8888", "0.0.0.0:1": "127.0.0.1:1", "10.0.0.5:8888": "10.0.0.5:8888", "[fd00::1]:80": "[fd00::1]:80",
	} {
		a, err := net.ResolveTCPAddr("tcp", in)
		if err != nil {
			t.Fatal(err)
		}
		if got := loopbackAddress(a); got != want {
			t.Errorf("%s: %s, want %s", in, got, want)
		}
	}
}
