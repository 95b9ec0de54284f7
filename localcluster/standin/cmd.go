package standin

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"k8s.io/client-go/tools/clientcmd"
)

const usage = `Usage: kubectl-sandbox kubelet --kubeconfig FILE --dir DIR --runtime FILE [flags]

Runs the local cluster's stand-in kubelet (kubectl-sandbox up starts it): one
sandbox-runtime process on 127.0.0.1 per sandbox Pod, with a work directory
per Sandbox under --dir, and the kwok PortForward, Exec and Logs objects that
make kubectl port-forward, exec and logs reach it. With --router-port, every
namespace gets upstream's Service sandbox-router-svc and a Ready Pod behind
it whose port 8080 leads to the host's sandbox router. SIGTERM or SIGINT stops
every runtime it runs; a stand-in killed otherwise and started again adopts
them. It refuses to start unless --kubeconfig reaches the local cluster
recorded in --dir/cluster.json (its API server's URL and CA, written when
kubectl-sandbox up made the cluster): against a shared cluster it would run
everyone's sandbox Pods on this machine.

Flags:
`

// Main is the stand-in kubelet as a command: it runs until SIGTERM or
// SIGINT, then stops every runtime process. It returns the exit code.
func Main(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("kubectl-sandbox kubelet", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { _, _ = fmt.Fprint(stderr, usage); fs.PrintDefaults() }
	var o Options
	var kubeconfig, probe string
	fs.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig of the local cluster")
	fs.StringVar(&o.Dir, "dir", "", "directory for the Sandboxes' work directories, logs and state")
	fs.StringVar(&o.Runtime, "runtime", "", "the sandbox-runtime binary")
	fs.StringVar(&probe, "health-probe-bind-address", "", "serve /healthz and /readyz on this 127.0.0.1 address (empty: none)")
	fs.DurationVar(&o.StopGrace, "stop-grace", 10*time.Second, "how long a runtime has after SIGTERM before SIGKILL")
	fs.DurationVar(&o.Resync, "resync", 15*time.Second, "how often every Sandbox is looked at again")
	fs.IntVar(&o.RouterPort, "router-port", 0, "port of the host's sandbox router on 127.0.0.1: every namespace gets the Service sandbox-router-svc and a Pod behind it forwarded there (0: none)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 || kubeconfig == "" || o.Dir == "" || o.Runtime == "" {
		fs.Usage()
		return 2
	}
	o.Logger = slog.New(slog.NewTextHandler(stderr, nil))
	if err := run(kubeconfig, probe, o); err != nil {
		o.Logger.Error("stand-in kubelet failed", "err", err)
		return 1
	}
	return 0
}

func run(kubeconfig, probe string, o Options) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	if err := CheckCluster(o.Dir, cfg); err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = 50, 100
	o.Config = cfg
	s, err := New(o)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if probe != "" {
		srv, err := serveProbes(probe, s)
		if err != nil {
			return err
		}
		defer func() { _ = srv.Close() }()
	}
	runErr := s.Run(ctx)
	o.Logger.Info("stopping every runtime")
	return errors.Join(runErr, StopAll(s.o.Dir, s.o.StopGrace))
}

// serveProbes serves /healthz (always 200) and /readyz (200 once the Pod
// cache has synced) on addr, which must be on 127.0.0.1.
func serveProbes(addr string, s *StandIn) (*http.Server, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil || host != Loopback {
		return nil, fmt.Errorf("--health-probe-bind-address %q: must be %s:PORT", addr, Loopback)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !s.Ready() {
			http.Error(w, "Pod cache not synced", http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "ok")
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second,
		WriteTimeout: 10 * time.Second, IdleTimeout: 30 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return srv, nil
}
