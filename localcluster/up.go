package localcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kindcluster "sigs.k8s.io/kind/pkg/cluster"
)

// UpOptions configure Up: the cluster, and optionally the controller and
// the samples.
type UpOptions struct {
	Options
	// Controller is the sandbox-controller binary to run against the
	// cluster; empty starts the cluster only.
	Controller string
	// ControllerArgs are added to the controller's flags.
	ControllerArgs []string
	// Samples is a directory of manifests to apply once the controller is
	// ready.
	Samples string
	// StandIn runs the stand-in kubelet (a sandbox-runtime process per
	// sandbox Pod, reachable through kubectl exec, port-forward and logs)
	// when its Runtime is set; not on kind, whose Pods run for real.
	StandIn StandInOptions
	// Router runs the sandbox router on 127.0.0.1 (port-forward transport,
	// no authentication) when its Binary is set.
	Router RouterOptions
	// Detach leaves the controller running after this process exits; Down
	// finds it through the state file in Workdir.
	Detach bool
}

// Env is what Up started.
type Env struct {
	Cluster    *Cluster
	Controller *Controller // nil without a controller
	StandIn    *StandIn    // nil without a stand-in kubelet
	Router     *Router     // nil without a router
}

// ErrRunning is returned by Up when the named cluster is already up.
var ErrRunning = errors.New("already running")

// Up starts the local cluster, then (with a controller binary) installs the
// admission webhook and CRD conversion pointed at this machine, starts the
// controller and waits for its /readyz, then applies the samples. On error
// everything it started is stopped again.
func Up(ctx context.Context, o UpOptions) (*Env, error) {
	if o.Name == "" || o.Workdir == "" {
		return nil, errors.New("local cluster: name and workdir are required")
	}
	workdir, err := filepath.Abs(o.Workdir)
	if err != nil {
		return nil, err
	}
	o.Workdir = workdir
	if running(workdir, o.Name) {
		return nil, fmt.Errorf("local cluster %q in %s: %w (stop it with `kubectl sandbox down --name %s --workdir %s`)",
			o.Name, workdir, ErrRunning, o.Name, workdir)
	}
	if o.Controller != "" {
		// Fail before the cluster starts, not a minute later.
		if st, err := os.Stat(o.Controller); err != nil || st.IsDir() {
			return nil, fmt.Errorf("controller binary %s: not an executable file (build it with `make controller`)", o.Controller)
		}
	}
	if o.StandIn.Runtime != "" {
		if st, err := os.Stat(o.StandIn.Runtime); err != nil || st.IsDir() {
			return nil, fmt.Errorf("sandbox-runtime binary %s: not an executable file (build it with `make runtime`)", o.StandIn.Runtime)
		}
	}
	if o.Router.Binary != "" {
		if st, err := os.Stat(o.Router.Binary); err != nil || st.IsDir() {
			return nil, fmt.Errorf("sandbox-router binary %s: not an executable file (build it with `make router`)", o.Router.Binary)
		}
	}
	c, err := Start(ctx, o.Options)
	if err != nil {
		return nil, err
	}
	env := &Env{Cluster: c}
	fail := func(err error) (*Env, error) {
		return nil, errors.Join(err, env.Down())
	}
	st := state{Kind: o.Kind, Kubeconfig: c.Kubeconfig}
	if o.Controller != "" {
		if env.Controller, err = startLocalController(ctx, c, o); err != nil {
			return fail(err)
		}
		st.ControllerPID, st.Marker = env.Controller.PID, c.Kubeconfig
		st.Metrics, st.LogPath = env.Controller.Metrics, env.Controller.LogPath
	}
	if o.Router.Binary != "" {
		ro := o.Router
		ro.Detach, ro.LogPath = o.Detach, filepath.Join(o.Workdir, o.Name+"-router.log")
		if env.Router, err = StartRouter(ctx, c, ro); err != nil {
			return fail(err)
		}
		st.RouterPID, st.RouterURL, st.Marker = env.Router.PID, env.Router.URL, c.Kubeconfig
	}
	if o.StandIn.Runtime != "" && !o.Kind {
		so := o.StandIn
		so.Detach, so.LogPath = o.Detach, filepath.Join(o.Workdir, o.Name+"-kubelet.log")
		if env.Router != nil {
			// sandbox-router-svc in every namespace, leading to the router.
			so.RouterPort = env.Router.Port()
		}
		if env.StandIn, err = StartStandIn(c, so); err != nil {
			return fail(err)
		}
		st.StandInPID = env.StandIn.PID
	}
	if err := writeState(statePath(workdir, o.Name), st); err != nil {
		return fail(err)
	}
	if o.Samples != "" {
		cl, err := c.Client()
		if err != nil {
			return fail(err)
		}
		if err := ApplyDir(ctx, cl, o.Samples); err != nil {
			return fail(err)
		}
	}
	return env, nil
}

// startLocalController starts the controller on this machine, on a fresh
// webhook port for every attempt while the one chosen is taken.
func startLocalController(ctx context.Context, c *Cluster, o UpOptions) (*Controller, error) {
	return RetryPortTaken(func() (*Controller, error) { return startLocalControllerOnce(ctx, c, o) })
}

func startLocalControllerOnce(ctx context.Context, c *Cluster, o UpOptions) (*Controller, error) {
	// The webhook server must be reachable from the API server on this
	// machine; the controller issues its certificate and injects the CA.
	webhookAddr, err := FreeAddr()
	if err != nil {
		return nil, err
	}
	_, portStr, _ := net.SplitHostPort(webhookAddr)
	port, _ := strconv.Atoi(portStr)
	cl, err := c.Client()
	if err != nil {
		return nil, err
	}
	if _, err := InstallLocalWebhook(ctx, cl, ControllerNamespace, port); err != nil {
		return nil, err
	}
	// v1alpha1 manifests are converted by the same server.
	if _, err := InstallLocalConversion(ctx, cl, port); err != nil {
		return nil, err
	}
	// The controller acts as its own ServiceAccount with the deploy RBAC:
	// the webhook lets only that identity set pool and claim ownership.
	kubeconfig, err := ControllerKubeconfig(ctx, c, cl)
	if err != nil {
		return nil, err
	}
	return StartController(ControllerOptions{
		Binary: o.Controller, Kubeconfig: kubeconfig, Args: controllerArgs(o, portStr), Detach: o.Detach,
		LogPath: filepath.Join(o.Workdir, o.Name+"-controller.log"),
	})
}

// controllerArgs are the local controller's flags (StartController adds the
// kubeconfig and the metrics and probe addresses, on loopback): its webhook
// too listens on loopback only, where the API server of this machine
// reaches it.
func controllerArgs(o UpOptions, webhookPort string) []string {
	return append([]string{"--leader-elect=false", "--extensions",
		"--webhook-host", LoopbackAddress, "--webhook-port", webhookPort, "--webhook-cert-dir", filepath.Join(o.Workdir, o.Name+"-webhook-certs"),
		"--controller-namespace", ControllerNamespace, "--controller-service-account", ControllerServiceAccount}, o.ControllerArgs...)
}

// Down stops what Up started: the router, the stand-in kubelet and its
// runtimes, the controller (SIGTERM, so it releases what it holds), then
// every cluster process.
func (e *Env) Down() error {
	var errs []error
	if e.Router != nil {
		errs = append(errs, e.Router.Stop())
	}
	if e.StandIn != nil {
		errs = append(errs, e.StandIn.Stop())
	}
	if e.Controller != nil {
		errs = append(errs, e.Controller.Stop())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	errs = append(errs, e.Cluster.Stop(ctx))
	_ = os.Remove(statePath(e.Cluster.Workdir, e.Cluster.Name))
	return errors.Join(errs...)
}

// Down stops the local cluster name in workdir and the controller a
// detached Up left running, and reports what it stopped. Nothing to stop is
// not an error.
func Down(ctx context.Context, workdir, name, binDir string, out io.Writer) error {
	workdir, err := filepath.Abs(workdir)
	if err != nil {
		return err
	}
	var errs []error
	stopped := false
	path := statePath(workdir, name)
	st, err := readState(path)
	sandboxes := filepath.Join(workdir, "clusters", name, "sandboxes")
	if err == nil && st.RouterPID > 0 && Alive(st.RouterPID, st.Marker) {
		_, _ = fmt.Fprintf(out, "stopping the sandbox router (pid %d)\n", st.RouterPID)
		errs = append(errs, StopPID(st.RouterPID, st.Marker, routerStopTimeout))
		stopped = true
	}
	if err == nil && st.StandInPID > 0 && Alive(st.StandInPID, sandboxes) {
		_, _ = fmt.Fprintf(out, "stopping the stand-in kubelet (pid %d) and its runtimes\n", st.StandInPID)
		errs = append(errs, stopStandIn(st.StandInPID, sandboxes))
		stopped = true
	} else if _, err := os.Stat(sandboxes); err == nil {
		errs = append(errs, stopStandIn(0, sandboxes)) // runtimes a killed stand-in left
	}
	if err == nil && st.ControllerPID > 0 && Alive(st.ControllerPID, st.Marker) {
		_, _ = fmt.Fprintf(out, "stopping the controller (pid %d)\n", st.ControllerPID)
		errs = append(errs, StopPID(st.ControllerPID, st.Marker, 30*time.Second))
		stopped = true
	}
	if st.Kind {
		_, _ = fmt.Fprintf(out, "deleting kind cluster %q\n", name)
		provider := kindcluster.NewProvider(kindcluster.ProviderWithDocker())
		errs = append(errs, provider.Delete(name, st.Kubeconfig))
		stopped = true
	} else if _, err := os.Stat(filepath.Join(workdir, "clusters", name)); err == nil {
		c, err := Open(workdir, name, binDir)
		if err != nil {
			return errors.Join(append(errs, err)...)
		}
		_, _ = fmt.Fprintf(out, "deleting local cluster %q\n", name)
		errs = append(errs, c.Stop(ctx))
		stopped = true
	} else if left := Processes(filepath.Join(workdir, "clusters", name)); len(left) > 0 {
		errs = append(errs, fmt.Errorf("processes of cluster %q are running but its state is gone: %v", name, left))
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, err)
	}
	if !stopped {
		_, _ = fmt.Fprintf(out, "no local cluster %q in %s; nothing to stop\n", name, workdir)
	}
	return errors.Join(errs...)
}

// DownAll stops every local cluster in workdir.
func DownAll(ctx context.Context, workdir, binDir string, out io.Writer) error {
	names, err := Names(workdir)
	if err != nil {
		return err
	}
	states, _ := filepath.Glob(filepath.Join(workdir, "*.state"))
	for _, s := range states {
		n := strings.TrimSuffix(filepath.Base(s), ".state")
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	var errs []error
	for _, n := range names {
		errs = append(errs, Down(ctx, workdir, n, binDir, out))
	}
	return errors.Join(errs...)
}

// running reports whether the named cluster has live processes or a live
// detached controller.
func running(workdir, name string) bool {
	if len(Processes(filepath.Join(workdir, "clusters", name))) > 0 {
		return true
	}
	st, err := readState(statePath(workdir, name))
	return err == nil && (st.ControllerPID > 0 && Alive(st.ControllerPID, st.Marker) || st.RouterPID > 0 && Alive(st.RouterPID, st.Marker))
}

// ApplyDir server-side applies every manifest in dir (not
// kustomization.yaml); manifests without a namespace go to "default".
func ApplyDir(ctx context.Context, cl client.Client, dir string) error {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return err
	}
	if len(files) == 0 {
		return fmt.Errorf("no *.yaml manifests in %s", dir)
	}
	for _, f := range files {
		if filepath.Base(f) == "kustomization.yaml" {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		for {
			obj := &unstructured.Unstructured{}
			if err := dec.Decode(&obj.Object); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				return fmt.Errorf("%s: %w", f, err)
			}
			if len(obj.Object) == 0 {
				continue
			}
			if obj.GetNamespace() == "" {
				obj.SetNamespace("default")
			}
			if err := cl.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), client.FieldOwner(FieldManager+"-samples"), client.ForceOwnership); err != nil {
				return fmt.Errorf("applying %s %s from %s: %w", obj.GetKind(), obj.GetName(), f, err)
			}
		}
	}
	return nil
}
