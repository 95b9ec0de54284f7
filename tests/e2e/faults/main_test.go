package faults

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/agentsandbox/reconciler/tests"
	"github.com/agentsandbox/reconciler/tests/cluster"
)

var (
	local      *cluster.Cluster
	controller string // path of the built binary
	workdir    string
)

// nodes: 110 Pods each; the crash scenario alone runs 550 Sandboxes twice.
// FAULTS_NODES overrides it to run one small scenario.
func nodes() int {
	if n, err := strconv.Atoi(os.Getenv("FAULTS_NODES")); err == nil && n > 0 {
		return n
	}
	return 14
}

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	flag.Parse()
	ctrllog.SetLogger(logr.Discard()) // the tests' clients log nothing worth reading
	if testing.Short() {
		fmt.Println("faults: skipped in -short mode (needs the local cluster)")
		return 0
	}
	if cluster.UseKind() {
		fmt.Println("faults: skipped with E2E_CLUSTER=kind (stops and restarts the kwok cluster's own processes)")
		return 0
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var err error
	workdir, err = os.MkdirTemp("", "agent-sandbox-faults-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() {
		if os.Getenv("FAULTS_KEEP") != "" {
			fmt.Println("faults: logs kept in", workdir)
			return
		}
		_ = os.RemoveAll(workdir)
	}()
	local, err = cluster.Start(ctx, cluster.Options{
		Name: "faults", Workdir: workdir, Nodes: nodes(), InstallCRDs: true, RuntimeClasses: []string{"gvisor", "kata"},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "faults: starting the local cluster:", err)
		return 1
	}
	defer func() {
		if err := local.Stop(context.Background()); err != nil {
			fmt.Fprintln(os.Stderr, "faults: stopping the local cluster:", err)
		}
	}()
	// The controllers' namespace: leader election Lease, webhook Secret.
	admin, err := client.New(local.Config, client.Options{})
	if err == nil {
		err = admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "agent-sandbox-system"}})
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "faults:", err)
		return 1
	}
	// FAULTS_CONTROLLER runs the scenarios against another build (say, an
	// older commit's) to see what they catch.
	if controller = os.Getenv("FAULTS_CONTROLLER"); controller != "" {
		return m.Run()
	}
	if controller, err = tests.BuildController(workdir); err != nil {
		fmt.Fprintln(os.Stderr, "faults:", err)
		return 1
	}
	return m.Run()
}
