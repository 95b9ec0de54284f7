package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/agentsandbox/reconciler/localcluster"
)

const upLong = `Starts a local Kubernetes cluster on this machine, without Docker: etcd,
kube-apiserver, kube-controller-manager, kube-scheduler and kwok nodes that run
Pods to Ready. It installs the agent-sandbox CRDs and the gvisor and kata
RuntimeClasses, runs sandbox-controller on this machine with its admission
webhook and CRD conversion, applies --samples, and prints the kubeconfig.

The cluster binaries are looked up in --bin-dir, else next to this program,
else on PATH (in a checkout, "make tools" builds them into bin/).

By default up returns once everything is ready and leaves it running; stop it
with "kubectl-sandbox down". With --foreground it waits, and Ctrl-C stops
everything.

Flags:
`

const downLong = `Stops what "kubectl-sandbox up" started: the controller (SIGTERM), then every
cluster process. Stopping a cluster that is not running is not an error.`

// defaultWorkdir is where up keeps cluster state unless told otherwise.
func defaultWorkdir() string {
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "agent-sandbox")
	}
	return filepath.Join(os.TempDir(), "agent-sandbox")
}

type upFlags struct {
	name, workdir, binDir string
	nodes                 int
	controller, samples   string
	runtime, router       string
	routerPort            int
	controllerArgs        stringList
	kind, foreground, all bool
	verbose               bool
}

func (f *upFlags) bindCommon(fs *pflag.FlagSet) {
	fs.StringVar(&f.name, "name", "agent-sandbox", "cluster name")
	fs.StringVar(&f.workdir, "workdir", defaultWorkdir(), "directory for the cluster's state, logs and kubeconfig")
	fs.StringVar(&f.binDir, "bin-dir", "", "directory holding etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok and kwokctl (default: next to this program, then PATH)")
}

// localCmd is up or down: no arguments, and none of kubectl's flags (the
// command makes or stops its own cluster).
func (a *app) localCmd(use, short, long string, f *upFlags, do func(cmd *cobra.Command) error) *cobra.Command {
	cmd := &cobra.Command{
		Use: use, Short: short, Long: long, Args: cobra.ArbitraryArgs,
		ValidArgsFunction: cobra.NoFileCompletions,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return a.fail(cmd, exitUsage, "unexpected arguments %v", args)
			}
			if set := a.kubeFlagsSet(cmd); len(set) > 0 {
				return a.fail(cmd, exitUsage, "%s: %s works on a local cluster of its own; kubectl's flags do not apply", strings.Join(set, ", "), commandName(cmd))
			}
			if a.stop(cmd, f) {
				return nil
			}
			return do(cmd)
		},
	}
	f.bindCommon(cmd.Flags())
	return cmd
}

func (a *app) upCmd() *cobra.Command {
	var f upFlags
	cmd := a.localCmd("up", "Start a local cluster (no Docker needed) with the CRDs, the controller, its webhooks and optional samples", upLong, &f,
		func(cmd *cobra.Command) error {
			if f.nodes < 1 {
				return a.fail(cmd, exitUsage, "--nodes must be at least 1")
			}
			if err := up(f, a.stdout, a.stderr); err != nil {
				return a.fail(cmd, exitFindings, "%v", err)
			}
			return nil
		})
	fs := cmd.Flags()
	fs.IntVar(&f.nodes, "nodes", 3, "number of fake kwok nodes")
	fs.StringVar(&f.controller, "controller", "", `sandbox-controller binary (default: next to this program, then PATH); "none" starts the cluster only`)
	fs.Var(&f.controllerArgs, "controller-arg", "extra flag for the controller, e.g. --controller-arg=--default-runtime-class=gvisor; repeatable")
	fs.StringVar(&f.samples, "samples", "", "directory of manifests to apply once the controller is ready")
	fs.StringVar(&f.runtime, "runtime", "", `sandbox-runtime binary the stand-in kubelet runs for each sandbox Pod (default: in --bin-dir, next to this program, then PATH); "none" runs no stand-in`)
	fs.StringVar(&f.router, "router", "", `sandbox-router binary run on 127.0.0.1 (port-forward transport, no authentication) for SDKs and "kubectl sandbox exec --router" (default: in --bin-dir, next to this program, then PATH); "none" runs no router`)
	fs.IntVar(&f.routerPort, "router-port", localcluster.DefaultRouterPort, "the router's port on 127.0.0.1; when it is taken, a free one is used (and printed)")
	fs.BoolVar(&f.kind, "kind", false, "create a kind cluster instead (Docker needed)")
	fs.BoolVar(&f.foreground, "foreground", false, "stay in the foreground; Ctrl-C stops everything")
	fs.BoolVarP(&f.verbose, "verbose", "v", false, "print kwokctl's output")
	fs.BoolVar(&f.verbose, "v", false, "same as --verbose")
	_ = fs.MarkHidden("v")
	_ = cmd.MarkFlagDirname("samples")
	_ = cmd.MarkFlagDirname("workdir")
	_ = cmd.MarkFlagDirname("bin-dir")
	return cmd
}

func up(f upFlags, stdout, stderr io.Writer) error {
	controller := f.controller
	switch controller {
	case "none":
		controller = ""
	case "":
		p, err := localcluster.FindBinary(f.binDir, "sandbox-controller")
		if err != nil {
			return fmt.Errorf("%w; or pass --controller PATH, or --controller none for the cluster only", err)
		}
		controller = p
	}
	standIn, err := standInOptions(f, stdout)
	if err != nil {
		return err
	}
	router, err := routerBinary(f, stdout)
	if err != nil {
		return err
	}
	if f.samples != "" {
		if st, err := os.Stat(f.samples); err != nil || !st.IsDir() {
			return fmt.Errorf("--samples %s: not a directory", f.samples)
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := io.Discard
	if f.verbose {
		log = stderr
	}
	kind := "kwok"
	if f.kind {
		kind = "kind"
	}
	_, _ = fmt.Fprintf(stdout, "starting local %s cluster %q (%d nodes) in %s ...\n", kind, f.name, f.nodes, f.workdir)
	start := time.Now()
	env, err := localcluster.Up(ctx, localcluster.UpOptions{
		Options: localcluster.Options{
			Name: f.name, Workdir: f.workdir, Nodes: f.nodes, InstallCRDs: true, BinDir: f.binDir,
			RuntimeClasses: []string{"gvisor", "kata"}, Kind: f.kind, Log: log,
		},
		Controller: controller, ControllerArgs: f.controllerArgs, Samples: f.samples, Detach: !f.foreground,
		StandIn: standIn, Router: localcluster.RouterOptions{Binary: router, Port: f.routerPort},
	})
	if err != nil {
		return err
	}
	_, _ = fmt.Fprintf(stdout, "\nLocal cluster %q is ready in %s.\n\n  export KUBECONFIG=%s\n\n",
		f.name, time.Since(start).Round(100*time.Millisecond), env.Cluster.Kubeconfig)
	if env.Controller != nil {
		_, _ = fmt.Fprintf(stdout, "The controller runs as pid %d; its log: %s\n", env.Controller.PID, env.Controller.LogPath)
		_, _ = fmt.Fprintf(stdout, "Its metrics: http://%s/metrics\n", env.Controller.Metrics)
		if f.samples != "" {
			_, _ = fmt.Fprintf(stdout, "The samples in %s are applied.\n", f.samples)
		}
	}
	if env.StandIn != nil {
		_, _ = fmt.Fprintf(stdout, "The stand-in kubelet runs as pid %d; its log: %s\n", env.StandIn.PID, env.StandIn.LogPath)
		_, _ = fmt.Fprintf(stdout, "Each sandbox Pod runs a sandbox-runtime on 127.0.0.1; work directories: %s/<namespace>/<sandbox>/work\n", env.StandIn.Dir)
	}
	if env.Router != nil {
		_, _ = fmt.Fprintf(stdout, "The sandbox router runs as pid %d; its log: %s\n", env.Router.PID, env.Router.LogPath)
		if env.Router.Fallback {
			_, _ = fmt.Fprintf(stdout, "(port %d is taken: the router listens on a free port instead)\n", f.routerPort)
		}
		_, _ = fmt.Fprintf(stdout, "router: %s\n", env.Router.URL)
		_, _ = fmt.Fprintf(stdout, "router metrics: %s\n", env.Router.Metrics)
		if env.StandIn != nil {
			_, _ = fmt.Fprint(stdout, "Every namespace has the Service sandbox-router-svc (port 8080) leading to it, where upstream's SDKs look in their port-forward modes\n")
		}
		// The router serves the E2B API on the same port (--e2b,
		// --e2b-auth=none: any non-empty key, sandboxes in default).
		_, _ = fmt.Fprintf(stdout, "E2B: %s (the same port; any non-empty API key; templates are the warm pools and SandboxTemplates of namespace default)\n", env.Router.URL)
		_, _ = fmt.Fprintf(stdout, "  export E2B_API_URL=%s E2B_SANDBOX_URL=%s E2B_API_KEY=local\n", env.Router.URL, env.Router.URL)
	}
	if env.Controller != nil {
		_, _ = fmt.Fprint(stdout, `
Try:
  kubectl get agent-sandbox
`)
		if env.StandIn != nil {
			_, _ = fmt.Fprint(stdout, `  kubectl exec sample-sandbox -- sh -c 'echo hello > hello.txt; ls -l'
  kubectl port-forward pod/sample-sandbox 8888 &   # then: curl -s localhost:8888/execute -H 'Content-Type: application/json' -d '{"command":"cat hello.txt"}'
  kubectl logs sample-sandbox
  kubectl sandbox exec sample-claim -- echo hi
`)
			if env.Router != nil {
				_, _ = fmt.Fprintf(stdout, "  curl -s %s/execute -H \"X-Sandbox-ID: $(kubectl get sandboxclaim sample-claim -o jsonpath='{.status.sandbox.name}')\" -H 'Content-Type: application/json' -d '{\"command\":\"echo hi\"}'\n", env.Router.URL)
			}
		}
		_, _ = fmt.Fprint(stdout, `  kubectl patch sandbox sample-sandbox --type merge -p '{"spec":{"operatingMode":"Suspended"}}'
  kubectl create -f - <<<'{"apiVersion":"extensions.agents.x-k8s.io/v1beta1","kind":"SandboxClaim","metadata":{"name":"my-claim"},"spec":{"warmPoolRef":{"name":"python-pool"}}}'
  kubectl get sandboxclaim my-claim; kubectl get swp python-pool
`)
	}
	if !f.foreground {
		_, _ = fmt.Fprintf(stdout, "\nStop everything with: kubectl-sandbox down --name %s --workdir %s\n", f.name, env.Cluster.Workdir)
		return nil
	}
	_, _ = fmt.Fprintln(stdout, "\nPress Ctrl-C to stop everything.")
	select {
	case <-ctx.Done():
	case err := <-controllerExit(env):
		_, _ = fmt.Fprintf(stdout, "\nthe controller exited (%v); see its log %s\n", err, env.Controller.LogPath)
	case err := <-routerExit(env):
		_, _ = fmt.Fprintf(stdout, "\nthe sandbox router exited (%v); see its log %s\n", err, env.Router.LogPath)
	case err := <-standInExit(env):
		_, _ = fmt.Fprintf(stdout, "\nthe stand-in kubelet exited (%v); see its log %s\n", err, env.StandIn.LogPath)
	}
	_, _ = fmt.Fprintln(stdout, "\nstopping ...")
	if err := env.Down(); err != nil {
		return err
	}
	_, _ = fmt.Fprintln(stdout, "stopped; no router, controller, stand-in kubelet, runtime or cluster process is left running")
	return nil
}

// standInOptions say how up runs the stand-in kubelet: this program's
// "kubelet" command with the sandbox-runtime binary of --runtime, found like
// the cluster binaries when not given. Without one the cluster still starts,
// with a note that its sandbox Pods are not reachable.
func standInOptions(f upFlags, stdout io.Writer) (localcluster.StandInOptions, error) {
	if f.runtime == "none" || f.kind {
		return localcluster.StandInOptions{}, nil
	}
	runtime := f.runtime
	if runtime == "" {
		p, err := localcluster.FindBinary(f.binDir, "sandbox-runtime")
		if err != nil {
			_, _ = fmt.Fprintf(stdout, "note: %v; sandbox Pods will not be reachable (kubectl exec, port-forward, logs)\n", err)
			return localcluster.StandInOptions{}, nil
		}
		runtime = p
	}
	// The stand-in runs detached, from another directory: a relative
	// path given on the command line would not be found there.
	runtime, err := filepath.Abs(runtime)
	if err != nil {
		return localcluster.StandInOptions{}, err
	}
	if _, err := os.Stat(runtime); err != nil {
		return localcluster.StandInOptions{}, fmt.Errorf("--runtime: %w", err)
	}
	self, err := os.Executable()
	if err != nil {
		return localcluster.StandInOptions{}, err
	}
	return localcluster.StandInOptions{Command: []string{self, "kubelet"}, Runtime: runtime}, nil
}

// routerBinary is the sandbox-router up runs, found like the cluster
// binaries when --router is not given; without one the cluster still
// starts, with a note.
func routerBinary(f upFlags, stdout io.Writer) (string, error) {
	switch f.router {
	case "none":
		return "", nil
	case "":
		p, err := localcluster.FindBinary(f.binDir, "sandbox-router")
		if err != nil {
			_, _ = fmt.Fprintf(stdout, "note: %v; no sandbox router runs (SDKs connect by port-forward)\n", err)
			return "", nil
		}
		return p, nil
	}
	return f.router, nil
}

// routerExit reports the router's exit (never, without one).
func routerExit(env *localcluster.Env) <-chan error {
	if env.Router == nil {
		return nil
	}
	return env.Router.Exited()
}

// standInExit reports the stand-in kubelet's exit (never, without one).
func standInExit(env *localcluster.Env) <-chan error {
	if env.StandIn == nil {
		return nil
	}
	return env.StandIn.Exited()
}

// controllerExit reports the controller's exit (never, without one).
func controllerExit(env *localcluster.Env) <-chan error {
	if env.Controller == nil {
		return nil
	}
	return env.Controller.Exited()
}

func (a *app) downCmd() *cobra.Command {
	var f upFlags
	cmd := a.localCmd("down", `Stop what "up" started`, downLong, &f, func(cmd *cobra.Command) error {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		var err error
		if f.all {
			err = localcluster.DownAll(ctx, f.workdir, f.binDir, a.stdout)
		} else {
			err = localcluster.Down(ctx, f.workdir, f.name, f.binDir, a.stdout)
		}
		if err != nil {
			return a.fail(cmd, exitFindings, "%v", err)
		}
		return nil
	})
	cmd.Flags().BoolVar(&f.all, "all", false, "stop every local cluster in --workdir")
	return cmd
}
