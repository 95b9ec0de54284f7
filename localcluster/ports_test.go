package localcluster

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestMain lets this test binary stand in for a controller that binds its
// ports (see fakeController).
func TestMain(m *testing.M) {
	if os.Getenv("LOCALCLUSTER_FAKE_CONTROLLER") != "" {
		os.Exit(fakeController(os.Args[1:]))
	}
	os.Exit(m.Run())
}

// fakeController binds its probe address and serves /readyz on it. It
// counts its runs in $LOCALCLUSTER_FAKE_CONTROLLER; while the count is
// below $FAKE_TAKE_PROBE its probe port is taken (by a listener of its
// own, so the kernel's own error is what it prints); --listen binds one
// more address, as the webhook port does.
func fakeController(args []string) int {
	fs := flag.NewFlagSet("fake", flag.ContinueOnError)
	probe := fs.String("health-probe-bind-address", "", "")
	listen := fs.String("listen", "", "")
	fs.String("kubeconfig", "", "")
	fs.String("metrics-bind-address", "", "")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	counter := os.Getenv("LOCALCLUSTER_FAKE_CONTROLLER")
	runs, _ := os.ReadFile(counter)
	_ = os.WriteFile(counter, append(runs, 'x'), 0o644)
	if take, _ := strconv.Atoi(os.Getenv("FAKE_TAKE_PROBE")); len(runs) < take {
		if _, err := net.Listen("tcp", *probe); err == nil {
			_, err = net.Listen("tcp", *probe)
			fmt.Println("setup failed:", err)
			return 1
		}
	}
	if *listen != "" {
		if _, err := net.Listen("tcp", *listen); err != nil {
			fmt.Println("setup failed:", err)
			return 1
		}
	}
	l, err := net.Listen("tcp", *probe)
	if err != nil {
		fmt.Println("setup failed:", err)
		return 1
	}
	_ = http.Serve(l, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	return 0
}

func startFake(t *testing.T, takeProbe int, args ...string) (*Controller, string, error) {
	t.Helper()
	dir := t.TempDir()
	counter := filepath.Join(dir, "runs")
	t.Setenv("LOCALCLUSTER_FAKE_CONTROLLER", counter)
	t.Setenv("FAKE_TAKE_PROBE", fmt.Sprint(takeProbe))
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	c, err := StartController(ControllerOptions{Binary: self, Kubeconfig: "unused", LogPath: filepath.Join(dir, "log"), Args: args})
	if c != nil {
		t.Cleanup(func() { _ = c.Cmd.Process.Kill() })
	}
	runs, _ := os.ReadFile(counter)
	return c, string(runs), err
}

// A probe port taken between its choice and the controller's listen is
// chosen again; the controller starts on the second try.
func TestStartControllerChoosesATakenPortAgain(t *testing.T) {
	c, runs, err := startFake(t, 1)
	if err != nil {
		t.Fatalf("StartController with its probe port taken once: %v", err)
	}
	if runs != "xx" {
		t.Errorf("the controller ran %d times; want 2 (once on the taken port, once on a fresh one)", len(runs))
	}
	if c.Probe == "" {
		t.Error("no probe address")
	}
}

// A port the caller chose (the webhook's) is not StartController's to
// change: it reports ErrPortTaken at once, and RetryPortTaken, choosing
// again, succeeds once the port is free.
func TestStartControllerReportsACallersTakenPort(t *testing.T) {
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = held.Close() }()
	_, runs, err := startFake(t, 0, "--listen", held.Addr().String())
	if !errors.Is(err, ErrPortTaken) || !strings.Contains(err.Error(), "address already in use") {
		t.Fatalf("StartController with --listen on a held port: %v; want ErrPortTaken", err)
	}
	if runs != "x" {
		t.Errorf("the controller ran %d times; want 1 (the port is the caller's)", len(runs))
	}

	attempts := 0
	_, err = RetryPortTaken(func() (*Controller, error) {
		attempts++
		addr := held.Addr().String()
		if attempts > 1 {
			addr = "127.0.0.1:0"
		}
		c, _, err := startFake(t, 0, "--listen", addr)
		return c, err
	})
	if err != nil || attempts != 2 {
		t.Errorf("RetryPortTaken: %d attempts, %v; want success on the second", attempts, err)
	}

	// Any other failure is not retried.
	attempts = 0
	_, err = RetryPortTaken(func() (int, error) { attempts++; return 0, errors.New("boom") })
	if attempts != 1 || err == nil {
		t.Errorf("RetryPortTaken on another error: %d attempts, %v; want 1 and the error", attempts, err)
	}
	// An address is one of those chosen only in full.
	var taken *portTakenError
	if err := withPortTaken(errors.New("x"), "listen tcp 127.0.0.1:43170: bind: address already in use", "127.0.0.1:4317"); !errors.As(err, &taken) || taken.ours {
		t.Errorf("127.0.0.1:43170 taken was read as the chosen 127.0.0.1:4317 (%v)", err)
	}
	if err := withPortTaken(errors.New("x"), "listen tcp 127.0.0.1:4317: bind: address already in use", "127.0.0.1:4317"); !errors.As(err, &taken) || !taken.ours {
		t.Errorf("127.0.0.1:4317 taken was not read as the chosen one (%v)", err)
	}
	// Nor is a port that stays taken retried forever.
	attempts = 0
	_, err = RetryPortTaken(func() (int, error) { attempts++; return 0, withPortTaken(errors.New("x"), "address already in use") })
	if attempts != startAttempts || !errors.Is(err, ErrPortTaken) {
		t.Errorf("RetryPortTaken on a port that stays taken: %d attempts, %v; want %d and ErrPortTaken", attempts, err, startAttempts)
	}
}
