package main

import (
	"flag"
	"net/http"
	"testing"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/agentsandbox/reconciler/cmd/sandbox-controller/serving"
)

// TestEveryServerHasTimeouts builds the servers the controller runs from
// its flags and checks each has read-header, read, write and idle
// timeouts and bounded headers.
func TestEveryServerHasTimeouts(t *testing.T) {
	for _, secure := range []string{"false", "true"} {
		t.Run("metrics-secure="+secure, func(t *testing.T) {
			var o options
			fs := flag.NewFlagSet("test", flag.ContinueOnError)
			o.bind(fs)
			if err := fs.Parse([]string{
				"--metrics-bind-address=127.0.0.1:0", "--health-probe-bind-address=127.0.0.1:0",
				"--enable-pprof", "--pprof-bind-address=127.0.0.1:0", "--enable-webhook=false", "--metrics-secure=" + secure,
			}); err != nil {
				t.Fatal(err)
			}
			s, err := listen(o, nil, nil, logr.Discard())
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				for _, l := range []interface{ Close() error }{s.metrics, s.probe, s.pprof} {
					_ = l.Close()
				}
			}()
			runnables, err := s.runnables(o, &rest.Config{Host: "https://127.0.0.1:1"}, http.DefaultClient)
			if err != nil {
				t.Fatal(err)
			}
			names := map[string]bool{}
			for _, r := range runnables {
				srv, ok := r.(*manager.Server)
				if !ok {
					continue
				}
				names[srv.Name] = true
				h := srv.Server
				if h.ReadHeaderTimeout <= 0 || h.ReadTimeout <= 0 || h.WriteTimeout <= 0 || h.IdleTimeout <= 0 || h.MaxHeaderBytes <= 0 {
					t.Errorf("%s server: read-header %s, read %s, write %s, idle %s, max header bytes %d; want all set",
						srv.Name, h.ReadHeaderTimeout, h.ReadTimeout, h.WriteTimeout, h.IdleTimeout, h.MaxHeaderBytes)
				}
			}
			for _, want := range []string{"metrics", "health probe", "pprof"} {
				if !names[want] {
					t.Errorf("no %s server among %v", want, names)
				}
			}
		})
	}
	// The webhook server is built when it starts, from these.
	if w := serving.WebhookTimeouts; w.ReadHeader <= 0 || w.Read <= 0 || w.Write <= 0 || w.Idle <= 0 || w.MaxHeaderBytes <= 0 {
		t.Errorf("webhook timeouts %+v; want all set", w)
	}
}
