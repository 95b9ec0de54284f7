package localcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	kindcluster "sigs.k8s.io/kind/pkg/cluster"

	"github.com/agentsandbox/reconciler/localcluster/standin"
)

// Options configure a local cluster.
type Options struct {
	// Name of the cluster; kwokctl keeps its state under Workdir/clusters/Name.
	Name string
	// Workdir is kwokctl's working directory (KWOK_WORKDIR). Required.
	Workdir string
	// Nodes is the number of fake nodes (110 pods, 32 CPU, 256Gi each).
	Nodes int
	// InstallCRDs installs the CRDs built into this binary once the cluster
	// is up, then restarts kube-controller-manager so that its garbage
	// collector knows them at once (see collectOurKinds).
	InstallCRDs bool
	// RuntimeClasses to create (handler = name), e.g. gvisor and kata; kwok
	// runs Pods of any RuntimeClass that exists.
	RuntimeClasses []string
	// BinDir holds etcd, kube-apiserver, kube-controller-manager,
	// kube-scheduler, kwok and kwokctl. Empty: next to the running
	// executable, then $PATH.
	BinDir string
	// Kind creates a kind cluster instead (Docker needed; Nodes and BinDir
	// are ignored).
	Kind bool
	// Log receives kwokctl's output; nil discards it.
	Log io.Writer
	// APIServerGCTrace has kube-apiserver print a line per garbage
	// collection (GODEBUG=gctrace=1) to its log,
	// Workdir/clusters/Name/logs/kube-apiserver.log: the benchmarks tell
	// which requests met one of its collections.
	APIServerGCTrace bool
}

// Cluster is a running local cluster.
type Cluster struct {
	Name    string
	Workdir string
	// Kubeconfig is the path of an admin kubeconfig for the cluster.
	Kubeconfig string
	// Config reaches the cluster as an admin, without client-side rate limits.
	Config *rest.Config

	kwokctl string
	kind    *kindcluster.Provider // set for a kind cluster
	log     io.Writer
}

// binaries kwokctl needs, by flag name.
var binaryFlags = []struct{ flag, name string }{
	{"--etcd-binary", "etcd"},
	{"--kube-apiserver-binary", "kube-apiserver"},
	{"--kube-controller-manager-binary", "kube-controller-manager"},
	{"--kube-scheduler-binary", "kube-scheduler"},
	{"--kwok-controller-binary", "kwok"},
}

// FindBinary returns the path of the named executable: in binDir when it is
// set, else next to the running executable (bin/ of a checkout holds the CLI
// and the cluster binaries together), else on $PATH. The error tells the user
// how to get it.
func FindBinary(binDir, name string) (string, error) {
	var dirs []string
	if binDir != "" {
		dirs = []string{binDir}
	} else if self, err := os.Executable(); err == nil {
		if real, err := filepath.EvalSymlinks(self); err == nil {
			self = real
		}
		dirs = []string{filepath.Dir(self)}
	}
	for _, d := range dirs {
		p := filepath.Join(d, name)
		st, err := os.Stat(p)
		if err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	if binDir == "" {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	where := strings.Join(dirs, ", ")
	if binDir == "" {
		where += " or on PATH"
	}
	return "", fmt.Errorf("%s not found in %s: in a checkout of the repository, `make tools` builds it into bin/ (or pass the directory that holds it)", name, where)
}

// Start creates the cluster, waits until its nodes are Ready and the
// "default" namespace's ServiceAccount exists and, if asked,
// installs the CRDs and RuntimeClasses. A cluster of the same name left over
// from an earlier run is deleted first. On error nothing is left running.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	if opts.Name == "" || opts.Workdir == "" {
		return nil, errors.New("local cluster: name and workdir are required")
	}
	if opts.Nodes <= 0 {
		opts.Nodes = 1
	}
	if opts.Log == nil {
		opts.Log = io.Discard
	}
	workdir, err := filepath.Abs(opts.Workdir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(workdir, 0o755); err != nil {
		return nil, err
	}
	opts.Workdir = workdir
	if opts.Kind {
		return startKind(ctx, opts)
	}
	kwokctl, err := FindBinary(opts.BinDir, "kwokctl")
	if err != nil {
		return nil, err
	}
	binaries := map[string]string{}
	for _, b := range binaryFlags {
		if binaries[b.name], err = FindBinary(opts.BinDir, b.name); err != nil {
			return nil, err
		}
	}
	config, err := writeKwokConfig(workdir, opts.APIServerGCTrace)
	if err != nil {
		return nil, err
	}
	args := createArgs(opts.Name, config, binaries)
	c := &Cluster{Name: opts.Name, Workdir: workdir, kwokctl: kwokctl, log: opts.Log}

	// A previous run that was killed may have left the cluster behind.
	if c.exists() {
		_ = c.kwok(ctx, "delete", "cluster", "--name", opts.Name)
	}
	unlock, err := lockCreate(ctx)
	if err != nil {
		return nil, err
	}
	for attempt := 1; ; attempt++ {
		err := c.kwok(ctx, args...)
		if err == nil {
			break
		}
		if attempt == createAttempts || ctx.Err() != nil {
			unlock()
			_ = c.Stop(context.WithoutCancel(ctx))
			return nil, fmt.Errorf("creating local cluster %q: %w", opts.Name, err)
		}
		// kwokctl gives up on its CRDs when the API server it started
		// serves late (a loaded machine): delete what it made, start over.
		_, _ = fmt.Fprintf(c.log, "creating local cluster %q failed, deleting it and trying again: %v\n", opts.Name, err)
		_ = c.kwok(context.WithoutCancel(ctx), "delete", "cluster", "--name", opts.Name)
	}
	unlock()
	if err := c.setup(ctx, opts); err != nil {
		_ = c.Stop(context.WithoutCancel(ctx))
		return nil, err
	}
	return c, nil
}

// createAttempts is how many times Start has kwokctl create the cluster.
const createAttempts = 2

// Open returns the kwok cluster of that name in workdir, which must exist.
func Open(workdir, name, binDir string) (*Cluster, error) {
	workdir, err := filepath.Abs(workdir)
	if err != nil {
		return nil, err
	}
	kwokctl, err := FindBinary(binDir, "kwokctl")
	if err != nil {
		return nil, err
	}
	c := &Cluster{Name: name, Workdir: workdir, kwokctl: kwokctl, log: io.Discard}
	if !c.exists() {
		return nil, fmt.Errorf("no local cluster %q in %s", name, workdir)
	}
	if err := c.loadConfig(); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *Cluster) dir() string { return filepath.Join(c.Workdir, "clusters", c.Name) }

func (c *Cluster) exists() bool {
	_, err := os.Stat(c.dir())
	return err == nil
}

func (c *Cluster) loadConfig() error {
	c.Kubeconfig = filepath.Join(c.dir(), "kubeconfig.yaml")
	if _, err := os.Stat(c.Kubeconfig); err != nil {
		return fmt.Errorf("kubeconfig of local cluster %q: %w", c.Name, err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
	if err != nil {
		return fmt.Errorf("loading kubeconfig %s: %w", c.Kubeconfig, err)
	}
	cfg.QPS, cfg.Burst = -1, 0
	c.Config = cfg
	return nil
}

func (c *Cluster) setup(ctx context.Context, opts Options) error {
	if err := c.loadConfig(); err != nil {
		return err
	}
	// The stand-in kubelet serves this cluster and no other.
	if err := standin.RecordCluster(c.SandboxDir(), c.Config); err != nil {
		return err
	}
	if err := c.ScaleNodes(ctx, opts.Nodes); err != nil {
		return err
	}
	if err := c.waitDefaultServiceAccount(ctx); err != nil {
		return err
	}
	if err := c.install(ctx, opts, ""); err != nil {
		return err
	}
	if opts.InstallCRDs {
		return c.collectOurKinds(ctx)
	}
	return nil
}

// ScaleNodes sets the number of fake nodes and waits until that many are Ready.
func (c *Cluster) ScaleNodes(ctx context.Context, n int) error {
	if c.kind != nil {
		return errors.New("a kind cluster's nodes cannot be scaled")
	}
	if err := c.kwok(ctx, "scale", "node", "--replicas", strconv.Itoa(n), "--name", c.Name); err != nil {
		return fmt.Errorf("scaling nodes to %d: %w", n, err)
	}
	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		return err
	}
	// Minutes, not seconds: on a loaded 2-core machine kwok can take a
	// while to mark many nodes Ready.
	err = poll(ctx, 4*time.Minute, func(ctx context.Context) error {
		nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		switch {
		case err != nil:
			return err
		case countReady(nodes.Items) == n && len(nodes.Items) == n:
			return nil
		}
		return fmt.Errorf("%d nodes, %d Ready", len(nodes.Items), countReady(nodes.Items))
	})
	if err != nil {
		return fmt.Errorf("waiting for %d Ready nodes (kwok-controller's log ends: %s): %w", n, c.logTail("kwok-controller", 8), err)
	}
	return nil
}

// logTail is the last n lines of a component's log, or why there are none.
func (c *Cluster) logTail(component string, n int) string {
	b, err := os.ReadFile(filepath.Join(c.dir(), "logs", component+".log"))
	if err != nil {
		return err.Error()
	}
	return lastLines(string(b), n)
}

func countReady(nodes []corev1.Node) int {
	n := 0
	for _, node := range nodes {
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				n++
			}
		}
	}
	return n
}

// Dir is the cluster's state directory (pids/, logs/, kubeconfig.yaml).
func (c *Cluster) Dir() string { return c.dir() }

// Stop deletes the cluster and checks that none of its processes survived.
func (c *Cluster) Stop(ctx context.Context) error {
	if c.kind != nil {
		return c.kind.Delete(c.Name, c.Kubeconfig)
	}
	err := c.kwok(ctx, "delete", "cluster", "--name", c.Name)
	// Processes exit asynchronously after their signal; give them a moment.
	deadline := time.Now().Add(20 * time.Second)
	for {
		left := Processes(c.dir())
		if len(left) == 0 {
			return err
		}
		if time.Now().After(deadline) {
			return errors.Join(err, fmt.Errorf("processes of cluster %q still running after delete: %v", c.Name, left))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// Names lists the kwok clusters kwokctl keeps in workdir.
func Names(workdir string) ([]string, error) {
	entries, err := os.ReadDir(filepath.Join(workdir, "clusters"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		if e.IsDir() {
			names = append(names, e.Name())
		}
	}
	return names, nil
}

// Processes returns the PIDs of processes whose command line mentions dir
// (every process of a kwokctl binary-runtime cluster runs with paths under
// its cluster directory).
func Processes(dir string) []int {
	var pids []int
	procs, _ := os.ReadDir("/proc")
	self := os.Getpid()
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil || pid == self {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", p.Name(), "cmdline"))
		if err != nil {
			continue
		}
		if bytes.Contains(cmdline, []byte(dir+"/")) {
			if state, err := os.ReadFile(filepath.Join("/proc", p.Name(), "stat")); err == nil && isZombie(state) {
				continue
			}
			pids = append(pids, pid)
		}
	}
	return pids
}

func isZombie(stat []byte) bool {
	// The state follows the parenthesised command name: "pid (comm) Z ...".
	i := bytes.LastIndexByte(stat, ')')
	return i >= 0 && i+2 < len(stat) && stat[i+2] == 'Z'
}

func (c *Cluster) kwok(ctx context.Context, args ...string) error {
	cmd := exec.CommandContext(ctx, c.kwokctl, args...)
	cmd.Env = append(os.Environ(), "KWOK_WORKDIR="+c.Workdir)
	var out bytes.Buffer
	cmd.Stdout = io.MultiWriter(c.log, &out)
	cmd.Stderr = cmd.Stdout
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("kwokctl %s: %w: %s", strings.Join(args[:min(len(args), 2)], " "), err, lastLines(out.String(), 15))
	}
	return nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
