package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentsandbox/reconciler/apply/runtimeclass"
	"github.com/agentsandbox/reconciler/localcluster/standin"
	"github.com/agentsandbox/reconciler/policy"
	"github.com/agentsandbox/reconciler/render"
)

// Exit codes a CI system can use.
const (
	exitOK       = 0
	exitFindings = 1 // validation errors, policy denials, claims that cannot be rendered
	exitUsage    = 2 // bad flags or unreadable input
)

var version = "dev"

const usage = `kubectl-sandbox renders, validates and policy-checks agent-sandbox manifests
offline, with the controller's own code, runs a local cluster to try them on,
and runs commands and copies files in sandboxes. As a kubectl plugin:
kubectl sandbox ...

Commands:
  render   -f PATH...  print the Pods, Services, PVCs, NetworkPolicies and member
                       Sandboxes the controller would apply for the manifests
  validate -f PATH...  check manifests against the CRD schemas and their
                       x-kubernetes-validations, as the API server would
  policy check -f PATH...
                       evaluate the policies on the manifests and on what they render
  policy export        print the configured policies as ValidatingAdmissionPolicy YAML
  diff     -f PATH...  server-side dry-run apply against the cluster; show how each
                       object and the children it renders would change
  exec [-it] CLAIM|SANDBOX -- COMMAND [ARG...]
                       run a command in a sandbox; print its output, exit with its code
                       (-i/-t: stdin and a terminal, through sandboxd)
  cp LOCAL SANDBOX:NAME, cp SANDBOX:PATH LOCAL
                       copy a file into or out of a sandbox
  up                   start a local cluster (no Docker needed) with the CRDs, the
                       controller, its webhooks and optional samples
  down                 stop what up started
  kubelet              the local cluster's stand-in kubelet (up starts it): runs a
                       sandbox-runtime per sandbox Pod for kubectl exec/port-forward/logs
  version              print the version

Common flags:
  -f, --filename PATH  file, directory or - (stdin); repeatable
  -R, --recursive      descend into directories
  -o, --output FORMAT  render: yaml (default), json, name; validate/policy check: text (default), json
  -n, --namespace NS   namespace for manifests that set none (default "default")

Exit codes: 0 ok, 1 findings (invalid, denied, not renderable, differences),
2 usage or input error; exec exits with the command's exit code.
Run "kubectl-sandbox COMMAND -h" for a command's flags.
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// stringList is a repeatable string flag.
type stringList []string

func (s *stringList) String() string { return strings.Join(*s, ",") }

func (s *stringList) Set(v string) error {
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			*s = append(*s, p)
		}
	}
	return nil
}

// options are the flags the commands share.
type options struct {
	files          stringList
	recursive      bool
	output         string
	namespace      string
	bundles        stringList
	policies       stringList
	defaultRuntime string
	controllerNS   string
	kubeconfig     string
	context        string
	fromCluster    bool
	// lookup finds a pool or template missing from the manifests (in the
	// cluster, with --from-cluster or for diff); nil looks nowhere.
	lookup func(kind, namespace, name string, into any) bool
	// runtimeClasses lists the cluster's RuntimeClasses (with
	// --from-cluster or for diff); nil: no cluster.
	runtimeClasses func() ([]string, error)
	// defaults, once resolved (see runtimeDefaults).
	defaults *render.Defaults
	stderr   io.Writer
}

func (o *options) bind(fs *flag.FlagSet, withPolicy bool) {
	fs.Var(&o.files, "f", "file, directory or - (stdin); repeatable")
	fs.Var(&o.files, "filename", "same as -f")
	fs.BoolVar(&o.recursive, "R", false, "descend into directories")
	fs.BoolVar(&o.recursive, "recursive", false, "same as -R")
	fs.StringVar(&o.output, "o", "", "output format")
	fs.StringVar(&o.output, "output", "", "same as -o")
	fs.StringVar(&o.namespace, "n", "default", "namespace for manifests that set none")
	fs.StringVar(&o.namespace, "namespace", "default", "same as -n")
	fs.StringVar(&o.defaultRuntime, "default-runtime-class", runtimeclass.Auto,
		"the controller's --default-runtime-class, the class of Pods whose template names none: auto (the first isolating class among the manifests' RuntimeClasses, else the cluster's, else gvisor), none, or a name")
	fs.StringVar(&o.controllerNS, "controller-namespace", "agent-sandbox-system", "the controller's namespace (template NetworkPolicies)")
	if withPolicy {
		fs.Var(&o.bundles, "bundle", "built-in policy bundle[=mode] ("+strings.Join(policy.Bundles(), ", ")+"; mode enforce, warn, audit or off, enforce if not given); repeatable; bundles not named are off; default "+policy.DefaultModes().String()+" unless --policy is given. A Namespace among the manifests (or, for diff, in the cluster) labelled "+policy.ModeLabelPrefix+"<bundle>=<mode> overrides a mode for its objects")
		fs.Var(&o.policies, "policy", "policy file or directory (ValidatingAdmissionPolicy YAML); repeatable")
	}
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		_, _ = fmt.Fprint(stdout, usage)
		return exitOK
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "up":
		return runUp(rest, stdout, stderr)
	case "down":
		return runDown(rest, stdout, stderr)
	case "exec":
		return runExec(rest, stdout, stderr)
	case "cp":
		return runCp(rest, stdin, stdout, stderr)
	case "kubelet":
		return standin.Main(rest, stderr)
	}
	if cmd == "policy" {
		if len(rest) == 0 {
			_, _ = fmt.Fprintln(stderr, "kubectl-sandbox policy: want a subcommand: check or export")
			return exitUsage
		}
		cmd, rest = "policy "+rest[0], rest[1:]
	}
	fs := flag.NewFlagSet("kubectl-sandbox "+cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	o := options{stderr: stderr}
	switch cmd {
	case "render", "validate":
		o.bind(fs, false)
		if cmd == "render" {
			fs.BoolVar(&o.fromCluster, "from-cluster", false, "resolve pools and templates missing from the manifests in the cluster")
			fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig (with --from-cluster)")
			fs.StringVar(&o.context, "context", "", "kubeconfig context (with --from-cluster)")
		}
	case "policy check":
		o.bind(fs, true)
		fs.BoolVar(&o.fromCluster, "from-cluster", false, "resolve pools and templates missing from the manifests in the cluster")
		fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig (with --from-cluster)")
		fs.StringVar(&o.context, "context", "", "kubeconfig context (with --from-cluster)")
	case "policy export":
		o.bind(fs, true)
	case "diff":
		o.bind(fs, true)
		fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig of the cluster to diff against")
		fs.StringVar(&o.context, "context", "", "kubeconfig context")
	case "version":
		_, _ = fmt.Fprintln(stdout, "kubectl-sandbox", version)
		return exitOK
	default:
		_, _ = fmt.Fprintf(stderr, "kubectl-sandbox: unknown command %q\n\n%s", cmd, usage)
		return exitUsage
	}
	if err := fs.Parse(rest); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	switch {
	case cmd == "render" && o.output != "" && o.output != "yaml" && o.output != "json" && o.output != "name":
		_, _ = fmt.Fprintf(stderr, "kubectl-sandbox %s: -o %s: want yaml, json or name\n", cmd, o.output)
		return exitUsage
	case (cmd == "validate" || cmd == "policy check") && o.output != "" && o.output != "text" && o.output != "json":
		_, _ = fmt.Fprintf(stderr, "kubectl-sandbox %s: -o %s: want text or json\n", cmd, o.output)
		return exitUsage
	}
	if fs.NArg() > 0 {
		_, _ = fmt.Fprintf(stderr, "kubectl-sandbox %s: unexpected arguments %v (give manifests with -f)\n", cmd, fs.Args())
		return exitUsage
	}
	if err := runtimeclass.CheckSetting(o.defaultRuntime); err != nil {
		_, _ = fmt.Fprintf(stderr, "kubectl-sandbox %s: %v\n", cmd, err)
		return exitUsage
	}
	var code int
	var err error
	if o.fromCluster {
		// render and policy check: pools and templates the manifests lack.
		var c client.Client
		if c, err = clusterClient(&o); err == nil {
			o.lookup, o.runtimeClasses = clusterLookup(c), clusterRuntimeClasses(c)
		}
	}
	switch {
	case err != nil:
	case cmd == "render":
		code, err = runRender(&o, stdin, stdout, stderr)
	case cmd == "diff":
		code, err = runDiff(&o, stdin, stdout)
	case cmd == "validate":
		code, err = runValidate(&o, stdin, stdout)
	case cmd == "policy check":
		code, err = runPolicyCheck(&o, stdin, stdout)
	case cmd == "policy export":
		code, err = runPolicyExport(&o, stdout)
	}
	if err != nil {
		_, _ = fmt.Fprintf(stderr, "kubectl-sandbox %s: %v\n", cmd, err)
		var in *inputError
		if errors.As(err, &in) {
			return exitUsage
		}
		return exitFindings
	}
	return code
}
