package main

import (
	"errors"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentsandbox/reconciler/apply/runtimeclass"
	"github.com/agentsandbox/reconciler/policy"
	"github.com/agentsandbox/reconciler/render"
)

// stringList is a repeatable string flag; commas separate values too.
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

func (s *stringList) Type() string { return "strings" }

// options are the flags the manifest commands share.
type options struct {
	files          stringList
	recursive      bool
	output         string
	namespace      string
	bundles        stringList
	policies       stringList
	defaultRuntime string
	controllerNS   string
	fromCluster    bool
	// kube reaches the cluster (diff, --from-cluster): kubectl's flags.
	kube genericclioptions.RESTClientGetter
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

func (o *options) bind(fs *pflag.FlagSet, withPolicy bool) {
	fs.VarP(&o.files, "filename", "f", "file, directory or - (stdin); repeatable")
	fs.BoolVarP(&o.recursive, "recursive", "R", false, "descend into directories")
	fs.StringVarP(&o.output, "output", "o", "", "output format")
	fs.StringVar(&o.defaultRuntime, "default-runtime-class", runtimeclass.Auto,
		"the controller's --default-runtime-class, the class of Pods whose template names none: auto (the first isolating class among the manifests' RuntimeClasses, else the cluster's, else gvisor), none, or a name")
	fs.StringVar(&o.controllerNS, "controller-namespace", "agent-sandbox-system", "the controller's namespace (template NetworkPolicies)")
	if withPolicy {
		fs.Var(&o.bundles, "bundle", "built-in policy bundle[=mode] ("+strings.Join(policy.Bundles(), ", ")+"; mode enforce, warn, audit or off, enforce if not given); repeatable; bundles not named are off; default "+policy.DefaultModes().String()+" unless --policy is given. A Namespace among the manifests (or, for diff, in the cluster) labelled "+policy.ModeLabelPrefix+"<bundle>=<mode> overrides a mode for its objects")
		fs.Var(&o.policies, "policy", "policy file or directory (ValidatingAdmissionPolicy YAML); repeatable")
	}
}

// manifestCommands are render, validate, policy check/export and diff.
func (a *app) manifestCommands() []*cobra.Command {
	render := a.manifestCmd("render -f PATH...", "Print the Pods, Services, PVCs, NetworkPolicies and member Sandboxes the controller would apply for the manifests", false, true, "yaml", "json", "name")
	validate := a.manifestCmd("validate -f PATH...", "Check manifests against the CRD schemas and their x-kubernetes-validations, as the API server would", false, false, "text", "json")
	diff := a.manifestCmd("diff -f PATH...", "Server-side dry-run apply against the cluster; show how each object and the children it renders would change", true, false)
	pol := &cobra.Command{
		Use: "policy", Short: "Check manifests against the policies, or export them",
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.fail(cmd, exitUsage, "want a subcommand: check or export")
		},
	}
	pol.AddCommand(
		a.manifestCmd("check -f PATH...", "Evaluate the policies on the manifests and on what they render", true, true, "text", "json"),
		a.manifestCmd("export", "Print the configured policies as ValidatingAdmissionPolicy YAML", true, false),
	)
	return []*cobra.Command{render, validate, pol, diff}
}

// manifestCmd is one command over manifests; outputs are its -o formats.
func (a *app) manifestCmd(use, short string, withPolicy, fromCluster bool, outputs ...string) *cobra.Command {
	o := &options{stderr: a.stderr}
	cmd := &cobra.Command{
		Use: use, Short: short, Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.namespace, o.kube = *a.kube.Namespace, a.kube
			if o.namespace == "" {
				o.namespace = "default"
			}
			if a.stop(cmd, o) {
				return nil
			}
			return a.runManifests(cmd, o, args, outputs)
		},
	}
	o.bind(cmd.Flags(), withPolicy)
	if fromCluster {
		cmd.Flags().BoolVar(&o.fromCluster, "from-cluster", false, "resolve pools and templates missing from the manifests in the cluster (kubectl's flags choose it)")
	}
	if len(outputs) > 0 {
		cmd.Flags().Lookup("output").Usage = "output format: " + strings.Join(outputs, ", ") + " (default " + outputs[0] + ")"
		_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions(outputs, cobra.ShellCompDirectiveNoFileComp))
	}
	if withPolicy {
		_ = cmd.RegisterFlagCompletionFunc("bundle", cobra.FixedCompletions(policy.Bundles(), cobra.ShellCompDirectiveNoSpace))
	}
	_ = cmd.MarkFlagFilename("filename", "yaml", "yml", "json")
	return cmd
}

func (a *app) runManifests(cmd *cobra.Command, o *options, args []string, outputs []string) error {
	name := commandName(cmd)
	if len(outputs) > 0 && o.output != "" && !slices.Contains(outputs, o.output) {
		return a.fail(cmd, exitUsage, "-o %s: want %s", o.output, orList(outputs))
	}
	if len(args) > 0 {
		return a.fail(cmd, exitUsage, "unexpected arguments %v (give manifests with -f)", args)
	}
	if err := runtimeclass.CheckSetting(o.defaultRuntime); err != nil {
		return a.fail(cmd, exitUsage, "%v", err)
	}
	var code int
	var err error
	if o.fromCluster {
		// render and policy check: pools and templates the manifests lack.
		var c client.Client
		if c, err = clusterClient(o); err == nil {
			o.lookup, o.runtimeClasses = clusterLookup(c), clusterRuntimeClasses(c)
		}
	}
	switch {
	case err != nil:
	case name == "render":
		code, err = runRender(o, a.stdin, a.stdout, a.stderr)
	case name == "diff":
		code, err = runDiff(o, a.stdin, a.stdout)
	case name == "validate":
		code, err = runValidate(o, a.stdin, a.stdout)
	case name == "policy check":
		code, err = runPolicyCheck(o, a.stdin, a.stdout)
	case name == "policy export":
		code, err = runPolicyExport(o, a.stdout)
	}
	if err != nil {
		var in *inputError
		if errors.As(err, &in) {
			return a.fail(cmd, exitUsage, "%v", err)
		}
		return a.fail(cmd, exitFindings, "%v", err)
	}
	if code != exitOK {
		return exitCode(code)
	}
	return nil
}

// orList is "a or b", "a, b or c".
func orList(s []string) string {
	if len(s) < 2 {
		return strings.Join(s, "")
	}
	return strings.Join(s[:len(s)-1], ", ") + " or " + s[len(s)-1]
}
