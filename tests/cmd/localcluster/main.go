package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentsandbox/reconciler/tests"
	"github.com/agentsandbox/reconciler/tests/cluster"
	"github.com/agentsandbox/reconciler/tests/envtest"
)

func main() {
	name := flag.String("name", "agent-sandbox", "cluster name")
	workdir := flag.String("workdir", filepath.Join(tests.RepoRoot(), ".work", "kwok"), "kwokctl working directory")
	nodes := flag.Int("nodes", 3, "number of fake kwok nodes")
	controller := flag.String("controller", "", "path of the sandbox-controller binary to run against the cluster (none: cluster only)")
	samples := flag.String("samples", "", "directory of manifests to apply once the controller is ready")
	deleteAll := flag.Bool("delete-all", false, "delete every cluster in the working directory and exit")
	verbose := flag.Bool("v", false, "print kwokctl's output")
	flag.Parse()

	if err := run(*name, *workdir, *nodes, *controller, *samples, *deleteAll, *verbose); err != nil {
		fmt.Fprintln(os.Stderr, "localcluster:", err)
		os.Exit(1)
	}
}

func run(name, workdir string, nodes int, controller, samples string, deleteAll, verbose bool) error {
	log := io.Discard
	if verbose {
		log = os.Stderr
	}
	if deleteAll {
		return cluster.DeleteAll(context.Background(), workdir, log)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	fmt.Printf("starting local cluster %q (%d kwok nodes) from %s ...\n", name, nodes, tests.BinDir())
	start := time.Now()
	c, err := cluster.Start(ctx, cluster.Options{
		Name: name, Workdir: workdir, Nodes: nodes, InstallCRDs: true,
		RuntimeClasses: []string{"gvisor", "kata"}, Log: log,
	})
	if err != nil {
		return err
	}
	stopCluster := func() error {
		stopCtx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		return c.Stop(stopCtx)
	}

	var ctrlProc *exec.Cmd
	var metricsAddr string
	ctrlLog := filepath.Join(workdir, name+"-controller.log")
	if controller != "" {
		// The admission webhook, reachable from the API server on this
		// machine; the controller issues its certificate and injects the CA.
		webhookAddr, err := tests.FreeAddr()
		if err != nil {
			return errors.Join(err, stopCluster())
		}
		_, portStr, _ := net.SplitHostPort(webhookAddr)
		port, _ := strconv.Atoi(portStr)
		admin, err := client.New(c.Config, client.Options{Scheme: envtest.Scheme()})
		if err != nil {
			return errors.Join(err, stopCluster())
		}
		if _, err := cluster.InstallLocalWebhook(ctx, admin, "agent-sandbox-system", port); err != nil {
			return errors.Join(err, stopCluster())
		}
		// v1alpha1 manifests are converted by the same server.
		if _, err := cluster.InstallLocalConversion(ctx, admin, port); err != nil {
			return errors.Join(err, stopCluster())
		}
		if ctrlProc, metricsAddr, err = startController(ctx, controller, c.Kubeconfig, ctrlLog,
			"--webhook-port", portStr, "--webhook-cert-dir", filepath.Join(workdir, name+"-webhook-certs"),
			"--controller-namespace", "agent-sandbox-system"); err != nil {
			return errors.Join(err, stopCluster())
		}
		if samples != "" {
			if err := applyDir(ctx, c, samples); err != nil {
				return errors.Join(err, stopController(ctrlProc), stopCluster())
			}
		}
	}

	fmt.Printf("\nLocal cluster %q is ready in %s.\n\n  export KUBECONFIG=%s\n\n", name, time.Since(start).Round(100*time.Millisecond), c.Kubeconfig)
	if ctrlProc != nil {
		fmt.Printf("The controller runs as pid %d; its log: %s\n", ctrlProc.Process.Pid, ctrlLog)
		fmt.Printf("Its metrics: http://%s/metrics\n", metricsAddr)
		if samples != "" {
			fmt.Printf("The samples in %s are applied.\n", samples)
		}
		fmt.Print(`
Try:
  kubectl get agent-sandbox
  kubectl patch sandbox sample-sandbox --type merge -p '{"spec":{"operatingMode":"Suspended"}}'
  kubectl create -f - <<<'{"apiVersion":"extensions.agents.x-k8s.io/v1beta1","kind":"SandboxClaim","metadata":{"name":"my-claim"},"spec":{"warmPoolRef":{"name":"python-pool"}}}'
  kubectl get sandboxclaim my-claim; kubectl get swp python-pool
`)
	}
	fmt.Println("\nPress Ctrl-C to stop everything.")

	<-ctx.Done()
	fmt.Println("\nstopping ...")
	err = errors.Join(stopController(ctrlProc), stopCluster())
	if err == nil {
		fmt.Println("stopped; no controller or cluster process is left running")
	}
	return err
}

// startController runs the controller binary against the cluster and waits
// until it reports ready.
func startController(ctx context.Context, bin, kubeconfig, logPath string, extra ...string) (*exec.Cmd, string, error) {
	probe, err := tests.FreeAddr()
	if err != nil {
		return nil, "", err
	}
	metrics, err := tests.FreeAddr()
	if err != nil {
		return nil, "", err
	}
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, "", err
	}
	args := append([]string{"--kubeconfig", kubeconfig, "--leader-elect=false", "--extensions",
		"--health-probe-bind-address", probe, "--metrics-bind-address", metrics}, extra...)
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Its own process group: Ctrl-C reaches us, and we stop it in order.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, "", fmt.Errorf("starting %s: %w", bin, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait(); _ = logFile.Close() }()
	ready := make(chan error, 1)
	go func() { ready <- tests.WaitReady(probe, exited, time.Minute) }()
	select {
	case err := <-ready:
		if err != nil {
			_ = cmd.Process.Kill()
			out, _ := os.ReadFile(logPath)
			return nil, "", fmt.Errorf("controller: %w\n%s", err, tail(out))
		}
		return cmd, metrics, nil
	case <-ctx.Done():
		_ = cmd.Process.Signal(syscall.SIGTERM)
		return nil, "", ctx.Err()
	}
}

// stopController sends SIGTERM and waits for the process to exit.
func stopController(cmd *exec.Cmd) error {
	if cmd == nil {
		return nil
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if err := cmd.Process.Signal(syscall.Signal(0)); err != nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	_ = cmd.Process.Kill()
	return fmt.Errorf("the controller did not stop within 30s after SIGTERM and was killed")
}

// applyDir server-side applies every manifest in dir (not kustomization.yaml).
func applyDir(ctx context.Context, c *cluster.Cluster, dir string) error {
	cl, err := client.New(c.Config, client.Options{Scheme: envtest.Scheme()})
	if err != nil {
		return err
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return err
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
			if err := cl.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), client.FieldOwner("localcluster-samples"), client.ForceOwnership); err != nil {
				return fmt.Errorf("applying %s %s from %s: %w", obj.GetKind(), obj.GetName(), f, err)
			}
		}
	}
	return nil
}

func tail(b []byte) string {
	lines := bytes.Split(bytes.TrimSpace(b), []byte("\n"))
	if len(lines) > 20 {
		lines = lines[len(lines)-20:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}
