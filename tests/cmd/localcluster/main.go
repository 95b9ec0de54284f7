package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/agentsandbox/reconciler/tests"
	"github.com/agentsandbox/reconciler/tests/cluster"
)

func main() {
	name := flag.String("name", "agent-sandbox", "cluster name")
	workdir := flag.String("workdir", filepath.Join(tests.RepoRoot(), ".work", "kwok"), "kwokctl working directory")
	nodes := flag.Int("nodes", 3, "number of fake kwok nodes")
	deleteAll := flag.Bool("delete-all", false, "delete every cluster in the working directory and exit")
	verbose := flag.Bool("v", false, "print kwokctl's output")
	flag.Parse()

	if err := run(*name, *workdir, *nodes, *deleteAll, *verbose); err != nil {
		fmt.Fprintln(os.Stderr, "localcluster:", err)
		os.Exit(1)
	}
}

func run(name, workdir string, nodes int, deleteAll, verbose bool) error {
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
	fmt.Printf(`
Local cluster %q is ready in %s with the agent-sandbox CRDs installed.

  export KUBECONFIG=%s

Try:
  kubectl get nodes
  kubectl apply -k config/samples
  kubectl get agent-sandbox

(The controller joins this cluster in a later release; until then objects are
stored and validated but not reconciled.)

Press Ctrl-C to stop the cluster.
`, name, time.Since(start).Round(100*time.Millisecond), c.Kubeconfig)

	<-ctx.Done()
	fmt.Println("\nstopping local cluster ...")
	stopCtx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.Stop(stopCtx); err != nil {
		return err
	}
	fmt.Println("stopped; no cluster processes are left running")
	return nil
}
