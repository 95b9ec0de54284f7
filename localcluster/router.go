package localcluster

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	routerconfig "github.com/agentsandbox/reconciler/config/router"
)

// RouterServiceAccount is the ServiceAccount the local sandbox router acts
// as: the deploy bundle's (config/router), in ControllerNamespace.
const RouterServiceAccount = "sandbox-router"

// RouterUser is the username the API server sees on the local router's
// requests.
const RouterUser = "system:serviceaccount:" + ControllerNamespace + ":" + RouterServiceAccount

// DefaultRouterPort is the local router's port when it is free (upstream's
// sandbox-router-svc:8080); otherwise a free one is taken.
const DefaultRouterPort = 8080

// RouterOptions say how to run the sandbox router on this machine.
type RouterOptions struct {
	// Binary is the sandbox-router binary; empty runs none.
	Binary string
	// Port is the port of its proxy on 127.0.0.1 (default
	// DefaultRouterPort); when taken, a free one is used instead.
	Port int
	// LogPath receives its output.
	LogPath string
	// Detach starts it in a session of its own (it outlives the caller).
	Detach bool
	// Args are added after its flags (a flag given again takes the later
	// value): tests run it with another --e2b-auth or --e2b-namespace.
	Args []string
}

// Router is a sandbox-router process started by StartRouter.
type Router struct {
	PID int
	// URL is its proxy (http://127.0.0.1:<port>); Metrics its /metrics,
	// /healthz and /readyz address.
	URL, Metrics string
	// Fallback says the default port was taken and another one was used.
	Fallback bool
	LogPath  string
	cmd      *exec.Cmd
	exited   chan error
}

// routerKwokRBAC is what --transport=kwok adds to the local router's
// rights: reading kwok's PortForward objects.
//
//go:embed router-kwok-rbac.yaml
var routerKwokRBAC []byte

// RouterKubeconfig gives the local router the identity it has when
// deployed with --transport=port-forward and the E2B API: the
// ServiceAccount and ClusterRoles of config/router and its portforward and
// e2b components (watch Pods and Sandboxes, pods/portforward,
// TokenReviews, SubjectAccessReviews, SandboxClaims) and the
// ValidatingAdmissionPolicy that narrows its writes, by impersonation,
// in the admin kubeconfig's path with ".router" added (the marker `down`
// looks for); and, for --transport=kwok, reading kwok's PortForward
// objects.
func RouterKubeconfig(ctx context.Context, c *Cluster, cl client.Client) (string, error) {
	policy, err := routerconfig.AdmissionPolicyE2B()
	if err != nil {
		return "", err
	}
	if err := applyYAML(ctx, cl, routerconfig.RBAC, routerconfig.RBACPortForward, routerconfig.RBACE2B, routerKwokRBAC, policy); err != nil {
		return "", err
	}
	return impersonatingKubeconfig(c, RouterUser, "router")
}

// StartRouter runs the sandbox router against the cluster as upstream's
// clients expect to reach it, on loopback only: --transport=kwok (kwok's
// Pod IPs lead nowhere; each Pod's kwok PortForward object says where the
// stand-in kubelet serves its ports, on 127.0.0.1, so the router connects
// there as it would to a pod IP: --allow-local-addresses; on kind, and when
// RouterOptions.Args say so, --transport=port-forward), --auth=none (the
// cluster is this user's; so is the E2B API's --e2b-auth: any non-empty
// E2B_API_KEY, sandboxes in namespace default), the proxy on 127.0.0.1:Port
// and the metrics on a free loopback port, and
// --allowed-hosts, so that a web page cannot drive it (DNS rebinding, a
// foreign Origin). It waits for /readyz (the caches synced), and starts
// again on fresh ports while one it chose was taken before it listened.
func StartRouter(ctx context.Context, c *Cluster, o RouterOptions) (*Router, error) {
	return RetryPortTaken(func() (*Router, error) { return startRouterOnce(ctx, c, o) })
}

func startRouterOnce(ctx context.Context, c *Cluster, o RouterOptions) (*Router, error) {
	if st, err := os.Stat(o.Binary); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
		return nil, fmt.Errorf("sandbox-router binary %s: not an executable file (build it with `make router`)", o.Binary)
	}
	cl, err := c.Client()
	if err != nil {
		return nil, err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ControllerNamespace}}
	if err := cl.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, err
	}
	kubeconfig, err := RouterKubeconfig(ctx, c, cl)
	if err != nil {
		return nil, err
	}
	if o.Port == 0 {
		o.Port = DefaultRouterPort
	}
	addr, fallback, err := routerAddr(o.Port)
	if err != nil {
		return nil, err
	}
	metrics, err := FreeAddr()
	if err != nil {
		return nil, err
	}
	logFile, err := os.Create(o.LogPath)
	if err != nil {
		return nil, err
	}
	transport := []string{"--transport=kwok", "--allow-local-addresses"}
	if c.kind != nil { // real Pods, their IPs inside Docker's network
		transport = []string{"--transport=port-forward"}
	}
	cmd := exec.Command(o.Binary, append(append([]string{"--kubeconfig", kubeconfig}, transport...), "--auth=none",
		"--http-bind-address="+addr, "--metrics-bind-address="+metrics, "--allowed-hosts=localhost",
		"--e2b", "--e2b-namespace=default", "--route-by-claim")...)
	cmd.Args = append(cmd.Args, o.Args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if o.Detach {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	} else {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // stopped in order after Ctrl-C
	}
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("starting %s: %w", o.Binary, err)
	}
	r := &Router{PID: cmd.Process.Pid, URL: "http://" + addr, Metrics: "http://" + metrics + "/metrics", Fallback: fallback,
		LogPath: o.LogPath, cmd: cmd, exited: make(chan error, 1)}
	go func() { r.exited <- cmd.Wait(); _ = logFile.Close() }()
	if err := WaitReady(metrics, r.exited, time.Minute); err != nil {
		return nil, startFailed("sandbox router", cmd.Process, err, o.LogPath, addr, metrics)
	}
	return r, nil
}

// routerAddr is 127.0.0.1:port when that port is free, else a free port
// (fallback true).
func routerAddr(port int) (string, bool, error) {
	addr := net.JoinHostPort(LoopbackAddress, strconv.Itoa(port))
	if l, err := net.Listen("tcp", addr); err == nil {
		_ = l.Close()
		return addr, false, nil
	}
	free, err := FreeAddr()
	return free, true, err
}

// Exited delivers the process's Wait result once, when it ends.
func (r *Router) Exited() <-chan error { return r.exited }

// Stop sends SIGTERM and waits up to 45 seconds (the router drains open
// requests for 30), then kills.
func (r *Router) Stop() error {
	if err := r.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		if errors.Is(err, os.ErrProcessDone) {
			return nil
		}
		return err
	}
	select {
	case err := <-r.exited:
		var exit *exec.ExitError
		if errors.As(err, &exit) && exit.Sys().(syscall.WaitStatus).Signaled() {
			return fmt.Errorf("sandbox router ended by %v", exit.Sys().(syscall.WaitStatus).Signal())
		}
		return err
	case <-time.After(routerStopTimeout):
		_ = r.cmd.Process.Kill()
		return fmt.Errorf("the sandbox router did not stop within %s of SIGTERM and was killed", routerStopTimeout)
	}
}

const routerStopTimeout = 45 * time.Second

// Port is the port of its proxy on 127.0.0.1.
func (r *Router) Port() int {
	u, err := url.Parse(r.URL)
	if err != nil {
		return 0
	}
	p, _ := strconv.Atoi(u.Port())
	return p
}
