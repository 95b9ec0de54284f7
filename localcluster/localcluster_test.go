package localcluster

import (
	"bytes"
	"context"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

func TestStateRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.state")
	want := state{ControllerPID: 42, StandInPID: 43, RouterPID: 44, RouterURL: "http://127.0.0.1:8080", Marker: "/w/clusters/x/kubeconfig.yaml", Metrics: "127.0.0.1:1", LogPath: "/w/x.log", Kubeconfig: "/k", Kind: true}
	if err := writeState(path, want); err != nil {
		t.Fatal(err)
	}
	got, err := readState(path)
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Fatalf("state: got %+v, want %+v", got, want)
	}
}

func TestFindBinary(t *testing.T) {
	dir := t.TempDir()
	if _, err := FindBinary(dir, "kwokctl"); err == nil || !strings.Contains(err.Error(), "make tools") || !strings.Contains(err.Error(), dir) {
		t.Fatalf("missing binary: error %v should name the directory and how to build it", err)
	}
	p := filepath.Join(dir, "kwokctl")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := FindBinary(dir, "kwokctl"); err == nil {
		t.Fatal("a file that is not executable was accepted")
	}
	if err := os.Chmod(p, 0o755); err != nil {
		t.Fatal(err)
	}
	if got, err := FindBinary(dir, "kwokctl"); err != nil || got != p {
		t.Fatalf("FindBinary = %q, %v; want %q", got, err, p)
	}
}

// StopPID signals only the process whose command line still carries the
// marker, and waits for it to exit.
func TestStopPID(t *testing.T) {
	marker := "localcluster-test-" + t.Name()
	cmd := exec.Command("sh", "-c", "sleep 60; : "+marker)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	if Alive(cmd.Process.Pid, "some-other-marker") {
		t.Fatal("Alive ignored the marker")
	}
	if err := StopPID(cmd.Process.Pid, "some-other-marker", time.Second); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
		t.Fatal("a process without the marker was stopped")
	case <-time.After(200 * time.Millisecond):
	}
	if !Alive(cmd.Process.Pid, marker) {
		t.Fatal("Alive: the process with the marker is not alive")
	}
	if err := StopPID(cmd.Process.Pid, marker, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	<-done
	if err := StopPID(cmd.Process.Pid, marker, time.Second); err != nil {
		t.Fatalf("stopping a process that is gone: %v", err)
	}
}

// Down on a working directory without a cluster has nothing to do and says so.
func TestDownNothing(t *testing.T) {
	var out bytes.Buffer
	if err := Down(context.Background(), t.TempDir(), "none", "", &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "nothing to stop") {
		t.Fatalf("output %q", out.String())
	}
}

func TestUpRefusesMissingController(t *testing.T) {
	_, err := Up(context.Background(), UpOptions{
		Options:    Options{Name: "x", Workdir: t.TempDir()},
		Controller: filepath.Join(t.TempDir(), "sandbox-controller"),
	})
	if err == nil || !strings.Contains(err.Error(), "make controller") {
		t.Fatalf("Up with a missing controller: %v", err)
	}
}

func TestUpRefusesMissingRuntime(t *testing.T) {
	_, err := Up(context.Background(), UpOptions{
		Options: Options{Name: "x", Workdir: t.TempDir()},
		StandIn: StandInOptions{Command: []string{"kubectl-sandbox", "kubelet"}, Runtime: filepath.Join(t.TempDir(), "sandbox-runtime")},
	})
	if err == nil || !strings.Contains(err.Error(), "make runtime") {
		t.Fatalf("Up with a missing sandbox-runtime: %v", err)
	}
}

// Every address the local cluster and its controller are told to listen on
// is loopback: kwokctl's bindAddress (all components) through the
// configuration file it reads first, and the controller's webhook, metrics
// and probes. tests/e2e (TestLoopbackOnly, TestUpDown) checks the sockets
// themselves.
func TestLoopbackArgs(t *testing.T) {
	workdir := t.TempDir()
	config, err := writeKwokConfig(workdir, false)
	if err != nil {
		t.Fatal(err)
	}
	if config != filepath.Join(workdir, "kwok.yaml") {
		t.Errorf("config at %s; kwokctl reads %s/kwok.yaml by default with KWOK_WORKDIR, and only it must be read", config, workdir)
	}
	conf := readKwokConfig(t, config)
	single := map[string]bool{}
	for _, p := range conf.ComponentsPatches {
		for _, a := range p.ExtraArgs {
			single[p.Name] = single[p.Name] || (a.Key == "leader-elect" && a.Value == "false")
		}
	}
	if !single["kube-scheduler"] || !single["kube-controller-manager"] {
		t.Errorf("kwokctl configuration %+v: the scheduler and controller manager must run without leader election", conf.ComponentsPatches)
	}
	if conf.APIVersion != "config.kwok.x-k8s.io/v1alpha1" || conf.Kind != "KwokctlConfiguration" || conf.Options.BindAddress != "127.0.0.1" {
		t.Errorf("kwokctl configuration %+v: want a KwokctlConfiguration binding 127.0.0.1", conf)
	}
	args := createArgs("x", config, map[string]string{"etcd": "/bin/etcd"})
	if len(args) < 3 || args[0] != "--config" || args[1] != config || args[2] != "create" {
		t.Errorf("kwokctl %v: --config must come first (kwokctl reads it before the command)", args)
	}
	if !slices.Contains(args, "/bin/etcd") {
		t.Errorf("kwokctl %v: the etcd binary is missing", args)
	}
	// The stand-in kubelet's per-Pod objects need kwok's CRDs.
	if !slices.Contains(args, "--enable-crds=PortForward,Exec,Logs") {
		t.Errorf("kwokctl %v: kwok's PortForward, Exec and Logs CRDs are not enabled", args)
	}

	ctl := strings.Join(controllerArgs(UpOptions{Options: Options{Name: "x", Workdir: workdir}}, "9443"), " ")
	if !strings.Contains(ctl, "--webhook-host 127.0.0.1 --webhook-port 9443") {
		t.Errorf("controller flags %q: the webhook must listen on 127.0.0.1", ctl)
	}
	addr, err := FreeAddr()
	if err != nil || !strings.HasPrefix(addr, "127.0.0.1:") {
		t.Errorf("FreeAddr (the metrics and probe addresses) = %s, %v; want 127.0.0.1:PORT", addr, err)
	}
}

// With APIServerGCTrace, kwokctl's configuration gives kube-apiserver
// GODEBUG=gctrace=1 and keeps the rest; without it, no component gets an
// environment of ours.
func TestAPIServerGCTraceConfig(t *testing.T) {
	for _, gcTrace := range []bool{false, true} {
		config, err := writeKwokConfig(t.TempDir(), gcTrace)
		if err != nil {
			t.Fatal(err)
		}
		conf := readKwokConfig(t, config)
		envs := map[string]string{}
		for _, p := range conf.ComponentsPatches {
			for _, e := range p.ExtraEnvs {
				envs[p.Name+" "+e.Name] = e.Value
			}
		}
		want := map[string]string{}
		if gcTrace {
			want["kube-apiserver GODEBUG"] = "gctrace=1"
		}
		if !maps.Equal(envs, want) || len(conf.ComponentsPatches) != 2+len(want) {
			t.Errorf("gcTrace %v: environments %v in %d patches; want %v beside the two leader-elect patches", gcTrace, envs, len(conf.ComponentsPatches), want)
		}
	}
}

// kwokConfigFile is what the tests read of kwokctl's configuration; any
// other field fails the strict read.
type kwokConfigFile struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Options    struct {
		BindAddress string `json:"bindAddress"`
	} `json:"options"`
	ComponentsPatches []struct {
		Name      string `json:"name"`
		ExtraArgs []struct {
			Key   string `json:"key"`
			Value string `json:"value"`
		} `json:"extraArgs"`
		ExtraEnvs []struct {
			Name  string `json:"name"`
			Value string `json:"value"`
		} `json:"extraEnvs"`
	} `json:"componentsPatches"`
}

// readKwokConfig reads the kwokctl configuration at path, strictly.
func readKwokConfig(t *testing.T, path string) kwokConfigFile {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var conf kwokConfigFile
	if err := yaml.UnmarshalStrict(data, &conf); err != nil {
		t.Fatal(err)
	}
	return conf
}
