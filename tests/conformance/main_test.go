package conformance

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/agentsandbox/reconciler/localcluster"
	"github.com/agentsandbox/reconciler/tests"
	"github.com/agentsandbox/reconciler/tests/envtest"
)

// Environment variables that attach the suite to a running cluster (say
// the one `make run` started) instead of starting its own.
const (
	// EnvKubeconfig is the cluster's admin kubeconfig.
	EnvKubeconfig = "CONFORMANCE_KUBECONFIG"
	// EnvRouterURL is its sandbox router (http://127.0.0.1:8080 for make run).
	EnvRouterURL = "CONFORMANCE_ROUTER_URL"
	// EnvNamespace is where the sample warm pool lives (default "default").
	EnvNamespace = "CONFORMANCE_NAMESPACE"
)

// The sample warm pool (config/samples) the suite claims from.
const samplePool = "python-pool"

// Suite is what every test of the package shares: one cluster running what
// `make run` runs.
type Suite struct {
	// Config reaches the cluster as its admin; Kubeconfig is its file.
	Config     *rest.Config
	Kubeconfig string
	// Client is a controller-runtime client with the project's scheme.
	Client client.Client
	// RouterURL is the host router (http://127.0.0.1:PORT).
	RouterURL string
	// Namespace holds the sample warm pool.
	Namespace string
	// Workdir holds the binaries and logs of a cluster the suite started
	// ("" when attached).
	Workdir string
	// Bin holds the binaries built from this tree (sandbox-controller,
	// sandbox-runtime, sandbox-router, kubectl-sandbox).
	Bin string
}

// suite is the package's shared environment, set by TestMain.
var suite *Suite

func TestMain(m *testing.M) {
	flag.Parse()
	ctrllog.SetLogger(logr.Discard())
	if testing.Short() {
		fmt.Println("conformance: skipped with -short (needs the local cluster)")
		os.Exit(0)
	}
	os.Exit(run(m))
}

func run(m *testing.M) int {
	s, down, err := setUp()
	if err != nil {
		fmt.Fprintln(os.Stderr, "conformance:", err)
		return 1
	}
	suite = s
	code := m.Run()
	if err := down(); err != nil {
		fmt.Fprintln(os.Stderr, "conformance: stopping the local cluster:", err)
		code = 1
	}
	return code
}

// setUp attaches to the cluster EnvKubeconfig names, or starts one as `make
// run` does; down stops what it started.
func setUp() (*Suite, func() error, error) {
	workdir, err := os.MkdirTemp("", "agent-sandbox-conformance-")
	if err != nil {
		return nil, nil, err
	}
	cleanup := func() {
		if os.Getenv("E2E_KEEP_WORKDIR") == "" {
			_ = os.RemoveAll(workdir)
		}
	}
	s := &Suite{Namespace: os.Getenv(EnvNamespace), Bin: filepath.Join(workdir, "bin")}
	if s.Namespace == "" {
		s.Namespace = "default"
	}
	if err := buildBinaries(s.Bin); err != nil {
		cleanup()
		return nil, nil, err
	}
	if kc := os.Getenv(EnvKubeconfig); kc != "" {
		s.Kubeconfig, s.RouterURL = kc, os.Getenv(EnvRouterURL)
		if s.RouterURL == "" {
			s.RouterURL = "http://127.0.0.1:8080"
		}
		if s.Config, err = clientcmd.BuildConfigFromFlags("", kc); err != nil {
			cleanup()
			return nil, nil, err
		}
		s.Config.QPS, s.Config.Burst = -1, -1
		if s.Client, err = client.New(s.Config, client.Options{Scheme: envtest.Scheme()}); err != nil {
			cleanup()
			return nil, nil, err
		}
		return s, func() error { cleanup(); return nil }, nil
	}
	s.Workdir = workdir
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	routerPort, err := freePort()
	if err != nil {
		cleanup()
		return nil, nil, err
	}
	env, err := localcluster.Up(ctx, localcluster.UpOptions{
		Options: localcluster.Options{
			Name: "conformance", Workdir: workdir, Nodes: 1, InstallCRDs: true, BinDir: tests.BinDir(),
			RuntimeClasses: []string{"gvisor", "kata"},
		},
		Controller: filepath.Join(s.Bin, "sandbox-controller"),
		StandIn: localcluster.StandInOptions{
			Command: []string{filepath.Join(s.Bin, "kubectl-sandbox"), "kubelet"},
			Runtime: filepath.Join(s.Bin, "sandbox-runtime"),
		},
		Router:  localcluster.RouterOptions{Binary: filepath.Join(s.Bin, "sandbox-router"), Port: routerPort},
		Samples: filepath.Join(tests.RepoRoot(), "config", "samples"),
	})
	if err != nil {
		cleanup()
		return nil, nil, fmt.Errorf("starting the local cluster as make run does: %w", err)
	}
	s.Config, s.Kubeconfig, s.RouterURL = env.Cluster.Config, env.Cluster.Kubeconfig, env.Router.URL
	if s.Client, err = client.New(s.Config, client.Options{Scheme: envtest.Scheme()}); err != nil {
		_ = env.Down()
		cleanup()
		return nil, nil, err
	}
	return s, func() error { defer cleanup(); return env.Down() }, nil
}

// buildBinaries builds what `make run` runs, from this tree, into dir.
func buildBinaries(dir string) error {
	cmd := exec.Command("go", "build", "-tags", tests.BuildTags, "-o", dir+string(filepath.Separator),
		"./cmd/sandbox-controller", "./cmd/sandbox-runtime", "./cmd/sandbox-router", "./cmd/kubectl-sandbox")
	cmd.Dir = tests.RepoRoot()
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building the binaries: %w\n%s", err, out)
	}
	return nil
}
