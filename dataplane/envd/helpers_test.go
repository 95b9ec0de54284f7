package envd

import (
	"context"
	"errors"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/agentsandbox/reconciler/dataplane/envd/envdpb/filesystempb/filesystempbconnect"
	"github.com/agentsandbox/reconciler/dataplane/envd/envdpb/processpb"
	"github.com/agentsandbox/reconciler/dataplane/envd/envdpb/processpb/processpbconnect"
)

// env is an envd server on a fresh base directory, with generated Connect
// clients speaking JSON, as the SDK does.
type env struct {
	base string
	url  string
	srv  *Server
	proc processpbconnect.ProcessClient
	fs   filesystempbconnect.FilesystemClient
}

func newEnv(t *testing.T) *env {
	t.Helper()
	base := filepath.Join(t.TempDir(), "root")
	if err := os.Mkdir(base, 0o755); err != nil {
		t.Fatal(err)
	}
	s := New(Options{BaseDir: base, MaxUploadBytes: 1 << 20})
	hs := httptest.NewServer(s)
	t.Cleanup(func() {
		s.Close()
		hs.Close()
	})
	return &env{
		base: base, url: hs.URL, srv: s,
		proc: processpbconnect.NewProcessClient(hs.Client(), hs.URL, connect.WithProtoJSON()),
		fs:   filesystempbconnect.NewFilesystemClient(hs.Client(), hs.URL, connect.WithProtoJSON()),
	}
}

// write makes a file under the base directory.
func (e *env) write(t *testing.T, rel, content string) {
	t.Helper()
	p := filepath.Join(e.base, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// result is what a Start or Connect stream delivered.
type result struct {
	pid      uint32
	stdout   strings.Builder
	stderr   strings.Builder
	pty      strings.Builder
	end      *processpb.ProcessEvent_EndEvent
	order    []string // event kinds in arrival order
	streamed error
}

// collect reads a stream of process events to its end.
func collect(t *testing.T, next func() bool, event func() *processpb.ProcessEvent, errf func() error) *result {
	t.Helper()
	r := &result{}
	for next() {
		ev := event()
		switch v := ev.GetEvent().(type) {
		case *processpb.ProcessEvent_Start:
			r.pid = v.Start.GetPid()
			r.order = append(r.order, "start")
		case *processpb.ProcessEvent_Data:
			r.stdout.Write(v.Data.GetStdout())
			r.stderr.Write(v.Data.GetStderr())
			r.pty.Write(v.Data.GetPty())
			r.order = append(r.order, "data")
		case *processpb.ProcessEvent_Keepalive:
			r.order = append(r.order, "keepalive")
		case *processpb.ProcessEvent_End:
			r.end = v.End
			r.order = append(r.order, "end")
		}
	}
	r.streamed = errf()
	return r
}

// run starts req and reads its stream to the end.
func (e *env) run(t *testing.T, req *processpb.StartRequest) *result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	st, err := e.proc.Start(ctx, connect.NewRequest(req))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = st.Close() }()
	return collect(t, st.Receive, func() *processpb.ProcessEvent { return st.Msg().GetEvent() }, st.Err)
}

// bash is the request the SDK's commands.run(cmd) sends.
func bash(cmd string) *processpb.StartRequest {
	return &processpb.StartRequest{Process: &processpb.ProcessConfig{Cmd: "/bin/bash", Args: []string{"-l", "-c", cmd}}, Stdin: new(bool)}
}

func code(err error) connect.Code {
	var ce *connect.Error
	if errors.As(err, &ce) {
		return ce.Code()
	}
	return 0
}

// eventually polls cond for up to 10 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}
