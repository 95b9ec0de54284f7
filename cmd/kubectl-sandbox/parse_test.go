package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/spf13/pflag"

	"github.com/agentsandbox/reconciler/dataplane/client"
	"github.com/agentsandbox/reconciler/localcluster"
)

func manifestOpts(mod func(*options)) *options {
	o := &options{namespace: "default", defaultRuntime: "auto", controllerNS: "agent-sandbox-system"}
	if mod != nil {
		mod(o)
	}
	return o
}

func execOpts(name string, command ...string) func(func(*execOptions)) *execOptions {
	return func(mod func(*execOptions)) *execOptions {
		o := &execOptions{sandbox: sandboxFlags{port: client.DefaultPort, readyTimeout: 3 * time.Minute}, name: name, command: command}
		if mod != nil {
			mod(o)
		}
		return o
	}
}

func cpOpts(src, dst string, mod func(*sandboxFlags)) *cpOptions {
	o := &cpOptions{sandbox: sandboxFlags{port: client.DefaultPort, readyTimeout: 3 * time.Minute}, src: src, dst: dst}
	if mod != nil {
		mod(&o.sandbox)
	}
	return o
}

func upOpts(mod func(*upFlags)) *upFlags {
	f := &upFlags{name: "agent-sandbox", workdir: defaultWorkdir(), nodes: 3, routerPort: localcluster.DefaultRouterPort}
	if mod != nil {
		mod(f)
	}
	return f
}

func downOpts(mod func(*upFlags)) *upFlags {
	f := &upFlags{name: "agent-sandbox", workdir: defaultWorkdir()}
	if mod != nil {
		mod(f)
	}
	return f
}

// parseCLI runs the command line up to its parsed options; kube holds the
// kubectl flags given, by name.
func parseCLI(t *testing.T, args ...string) (path string, opts any, kube map[string]string) {
	t.Helper()
	var stderr bytes.Buffer
	a := &app{stdin: strings.NewReader(""), stdout: &bytes.Buffer{}, stderr: &stderr}
	a.parsed = func(p string, o any) bool {
		path, opts = p, o
		kube = map[string]string{}
		return true
	}
	if code := a.execute(args); code != exitOK || opts == nil {
		t.Fatalf("%q: exit %d, no options parsed; stderr: %s", args, code, stderr.String())
	}
	a.rootCmd.PersistentFlags().VisitAll(func(f *pflag.Flag) {
		if f.Changed {
			kube[f.Name] = f.Value.String()
		}
	})
	return path, opts, kube
}

// TestOldInvocations: every command line the README, the Makefile and the
// tests use, and the single-dash spellings Go's flag package accepted,
// parse to the options they always meant; kubectl's flags reach kubectl's
// options.
func TestOldInvocations(t *testing.T) {
	ignore := cmp.Options{
		cmp.AllowUnexported(options{}, execOptions{}, cpOptions{}, sandboxFlags{}, upFlags{}),
		cmpopts.IgnoreFields(options{}, "kube", "stderr", "lookup", "runtimeClasses", "defaults"),
		cmpopts.IgnoreFields(sandboxFlags{}, "kube"),
		cmpopts.EquateEmpty(),
	}
	const kc = "/tmp/kubeconfig"
	for _, tc := range []struct {
		args string
		path string
		want any
		kube map[string]string
	}{
		// tests/ and the README
		{"render -f golden/cli/mixed/input", "render", manifestOpts(func(o *options) { o.files = stringList{"golden/cli/mixed/input"} }), nil},
		{"render -f in -o name", "render", manifestOpts(func(o *options) { o.files, o.output = stringList{"in"}, "name" }), nil},
		{"render -f - --default-runtime-class none", "render", manifestOpts(func(o *options) { o.files, o.defaultRuntime = stringList{"-"}, "none" }), nil},
		{"render -f manifests/sandbox.yaml", "render", manifestOpts(func(o *options) { o.files = stringList{"manifests/sandbox.yaml"} }), nil},
		{"validate -f in -o json", "validate", manifestOpts(func(o *options) { o.files, o.output = stringList{"in"}, "json" }), nil},
		{"validate -f manifests/ -R", "validate", manifestOpts(func(o *options) { o.files, o.recursive = stringList{"manifests/"}, true }), nil},
		{"policy check -f in --bundle restricted", "policy check", manifestOpts(func(o *options) { o.files, o.bundles = stringList{"in"}, stringList{"restricted"} }), nil},
		{"policy check -f manifests/ -R -o json", "policy check", manifestOpts(func(o *options) { o.files, o.recursive, o.output = stringList{"manifests/"}, true, "json" }), nil},
		{"policy check --bundle baseline=warn -f m", "policy check", manifestOpts(func(o *options) { o.files, o.bundles = stringList{"m"}, stringList{"baseline=warn"} }), nil},
		{"policy export --bundle runtime-isolation --bundle baseline", "policy export", manifestOpts(func(o *options) { o.bundles = stringList{"runtime-isolation", "baseline"} }), nil},
		{"policy export", "policy export", manifestOpts(nil), nil},
		{"diff -f sandbox.yaml --kubeconfig " + kc, "diff", manifestOpts(func(o *options) { o.files = stringList{"sandbox.yaml"} }), map[string]string{"kubeconfig": kc}},
		{"exec -t --kubeconfig " + kc + " -n ns sbd -- sh -c stty", "exec", execOpts("sbd", "sh", "-c", "stty")(func(o *execOptions) { o.tty, o.sandbox.namespace = true, "ns" }), map[string]string{"kubeconfig": kc, "namespace": "ns"}},
		{"exec my-claim -n team -- sh -c exit", "exec", execOpts("my-claim", "sh", "-c", "exit")(func(o *execOptions) { o.sandbox.namespace = "team" }), map[string]string{"namespace": "team"}},
		{"exec -n team sb-1 ls -la", "exec", execOpts("sb-1", "ls", "-la")(func(o *execOptions) { o.sandbox.namespace = "team" }), map[string]string{"namespace": "team"}},
		{"exec sample-claim -- echo hi", "exec", execOpts("sample-claim", "echo", "hi")(nil), nil},
		{"exec --router http://127.0.0.1:8080 sample-claim -- echo hi", "exec", execOpts("sample-claim", "echo", "hi")(func(o *execOptions) { o.sandbox.router = "http://127.0.0.1:8080" }), nil},
		{"exec -it sample-claim -- sh", "exec", execOpts("sample-claim", "sh")(func(o *execOptions) { o.stdin, o.tty = true, true }), nil},
		{"exec --sandboxd sample-claim -- echo hi", "exec", execOpts("sample-claim", "echo", "hi")(func(o *execOptions) { o.sandbox.sandboxd = true }), nil},
		{"cp ./data.csv sample-claim:", "cp", cpOpts("./data.csv", "sample-claim:", nil), nil},
		{"cp sample-claim:results.json .", "cp", cpOpts("sample-claim:results.json", ".", nil), nil},
		{"cp - sb:in.txt -n team", "cp", cpOpts("-", "sb:in.txt", func(f *sandboxFlags) { f.namespace = "team" }), map[string]string{"namespace": "team"}},
		// the Makefile
		{"up --foreground --name agent-sandbox --workdir .work/kwok --bin-dir bin --controller bin/sandbox-controller --runtime bin/sandbox-runtime --router bin/sandbox-router --samples config/samples",
			"up", upOpts(func(f *upFlags) {
				f.foreground, f.workdir, f.binDir, f.controller, f.runtime, f.router, f.samples = true, ".work/kwok", "bin", "bin/sandbox-controller", "bin/sandbox-runtime", "bin/sandbox-router", "config/samples"
			}), nil},
		{"up --kind --foreground --name agent-sandbox --workdir .work/kind --controller bin/sandbox-controller --samples config/samples",
			"up", upOpts(func(f *upFlags) {
				f.kind, f.foreground, f.workdir, f.controller, f.samples = true, true, ".work/kind", "bin/sandbox-controller", "config/samples"
			}), nil},
		{"down --all --workdir .work/kwok --bin-dir bin", "down", downOpts(func(f *upFlags) { f.all, f.workdir, f.binDir = true, ".work/kwok", "bin" }), nil},
		{"up --nodes 1 --controller c --runtime r --router rt --name n --workdir w --bin-dir b", "up", upOpts(func(f *upFlags) {
			f.nodes, f.controller, f.runtime, f.router, f.name, f.workdir, f.binDir = 1, "c", "r", "rt", "n", "w", "b"
		}), nil},
		{"up --foreground --name run --workdir w --nodes 1 --bin-dir b --controller c --runtime r --router rt --samples s", "up", upOpts(func(f *upFlags) {
			f.foreground, f.name, f.workdir, f.nodes, f.binDir, f.controller, f.runtime, f.router, f.samples = true, "run", "w", 1, "b", "c", "r", "rt", "s"
		}), nil},
		{"down --name updown --workdir w --bin-dir b", "down", downOpts(func(f *upFlags) { f.name, f.workdir, f.binDir = "updown", "w", "b" }), nil},
		{"up --controller none --nodes 5", "up", upOpts(func(f *upFlags) { f.controller, f.nodes = "none", 5 }), nil},
		{"up --controller-arg=--default-runtime-class=gvisor", "up", upOpts(func(f *upFlags) { f.controllerArgs = stringList{"--default-runtime-class=gvisor"} }), nil},
		{"up --runtime none --router none", "up", upOpts(func(f *upFlags) { f.runtime, f.router = "none", "none" }), nil},
		{"down", "down", downOpts(nil), nil},
		// single-dash spellings of long flags
		{"render -filename a -recursive -output json -namespace ns -from-cluster -kubeconfig k -context c -default-runtime-class=kata -controller-namespace cns", "render",
			manifestOpts(func(o *options) {
				o.files, o.recursive, o.output, o.namespace, o.fromCluster, o.defaultRuntime, o.controllerNS = stringList{"a"}, true, "json", "ns", true, "kata", "cns"
			}), map[string]string{"kubeconfig": "k", "context": "c", "namespace": "ns"}},
		{"policy check -f a,b -bundle baseline=warn -policy p -policy=q", "policy check",
			manifestOpts(func(o *options) {
				o.files, o.bundles, o.policies = stringList{"a", "b"}, stringList{"baseline=warn"}, stringList{"p", "q"}
			}), nil},
		{"exec -kubeconfig k -context c -namespace ns -router r -router-token t -port 9 -ready-timeout 10s -sandboxd sb ls -port", "exec",
			execOpts("sb", "ls", "-port")(func(o *execOptions) {
				o.sandbox = sandboxFlags{namespace: "ns", router: "r", routerToken: "t", port: 9, readyTimeout: 10 * time.Second, sandboxd: true}
			}), map[string]string{"kubeconfig": "k", "context": "c", "namespace": "ns"}},
		{"exec -stdin -tty sb -- sh", "exec", execOpts("sb", "sh")(func(o *execOptions) { o.stdin, o.tty = true, true }), nil},
		{"exec -ti sb -- sh", "exec", execOpts("sb", "sh")(func(o *execOptions) { o.stdin, o.tty = true, true }), nil},
		{"exec --it sb -- sh", "exec", execOpts("sb", "sh")(func(o *execOptions) { o.stdin, o.tty = true, true }), nil},
		{"exec -i sb -- cat", "exec", execOpts("sb", "cat")(func(o *execOptions) { o.stdin = true }), nil},
		{"cp -n ns -kubeconfig k a sb:", "cp", cpOpts("a", "sb:", func(f *sandboxFlags) { f.namespace = "ns" }), map[string]string{"kubeconfig": "k", "namespace": "ns"}},
		{"up -name n -workdir w -bin-dir b -nodes 2 -controller c -controller-arg -x=1 -samples s -runtime r -router rt -router-port 9 -kind -foreground -v", "up",
			upOpts(func(f *upFlags) {
				*f = upFlags{name: "n", workdir: "w", binDir: "b", nodes: 2, controller: "c", controllerArgs: stringList{"-x=1"}, samples: "s",
					runtime: "r", router: "rt", routerPort: 9, kind: true, foreground: true, verbose: true}
			}), nil},
		{"up --v", "up", upOpts(func(f *upFlags) { f.verbose = true }), nil},
		{"down -all -name n -workdir w", "down", downOpts(func(f *upFlags) { f.all, f.name, f.workdir = true, "n", "w" }), nil},
		// kubectl's flags, before or after the command
		{"exec --as alice --as-group g1 --as-group g2 --as-uid 42 --token T --server https://s --request-timeout 5s --insecure-skip-tls-verify --certificate-authority ca --cluster cl --user u sb -- ls", "exec",
			execOpts("sb", "ls")(nil), map[string]string{"as": "alice", "as-group": "[g1,g2]", "as-uid": "42", "token": "T", "server": "https://s",
				"request-timeout": "5s", "insecure-skip-tls-verify": "true", "certificate-authority": "ca", "cluster": "cl", "user": "u"}},
		{"--context c -n team exec sb -- ls", "exec", execOpts("sb", "ls")(func(o *execOptions) { o.sandbox.namespace = "team" }), map[string]string{"context": "c", "namespace": "team"}},
	} {
		t.Run(tc.args, func(t *testing.T) {
			path, opts, kube := parseCLI(t, strings.Fields(tc.args)...)
			if want := "kubectl sandbox " + tc.path; path != want {
				t.Errorf("command %q, want %q", path, want)
			}
			if d := cmp.Diff(tc.want, opts, ignore); d != "" {
				t.Errorf("options (-want +got):\n%s", d)
			}
			if d := cmp.Diff(tc.kube, kube, cmpopts.EquateEmpty()); d != "" {
				t.Errorf("kubectl flags (-want +got):\n%s", d)
			}
		})
	}
}

// TestKubectlFlagsRefused: up and down make or stop a cluster of their
// own; kubectl's flags there are a mistake, said so.
func TestKubectlFlagsRefused(t *testing.T) {
	for _, args := range [][]string{{"up", "--context", "prod"}, {"down", "-n", "x"}, {"--server", "https://s", "up"}} {
		_, stderr, code := runCLI(t, "", args...)
		if code != exitUsage || !strings.Contains(stderr, "kubectl's flags do not apply") {
			t.Errorf("%q: exit %d, %s", args, code, stderr)
		}
	}
}
