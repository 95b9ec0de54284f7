package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/cli-runtime/pkg/genericclioptions"

	"github.com/agentsandbox/reconciler/cmd/kubectlplugin"
	"github.com/agentsandbox/reconciler/localcluster/standin"
)

// Exit codes a CI system can use.
const (
	exitOK       = 0
	exitFindings = 1 // validation errors, policy denials, claims that cannot be rendered
	exitUsage    = 2 // bad flags or unreadable input
)

var version = "dev"

const rootLong = `kubectl-sandbox renders, validates and policy-checks agent-sandbox manifests
offline, with the controller's own code, runs a local cluster to try them on,
and runs commands and copies files in sandboxes. As a kubectl plugin:
kubectl sandbox ...

kubectl's own flags (--kubeconfig, --context, --cluster, --user,
-n/--namespace, --as, --as-group, --as-uid, --token, --server,
--request-timeout, --insecure-skip-tls-verify, --certificate-authority, ...)
choose the cluster of diff, exec, cp and --from-cluster; for render, validate
and policy, -n is the namespace of manifests that set none (default
"default"). Single-dash spellings of long flags (-kubeconfig) still work.

Exit codes: 0 ok, 1 findings (invalid, denied, not renderable, differences),
2 usage or input error; exec exits with the command's exit code.`

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// exitCode ends a command with code; its message, if any, is printed.
type exitCode int

func (e exitCode) Error() string { return fmt.Sprintf("exit %d", int(e)) }

// app is one invocation: its streams and kubectl's flags.
type app struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	kube           *genericclioptions.ConfigFlags
	// parsed, when set (tests), sees each command's options once its flags
	// are parsed; returning true stops there.
	parsed func(command string, options any) bool
	// rootCmd is the command tree of the last execute.
	rootCmd *cobra.Command
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return (&app{stdin: stdin, stdout: stdout, stderr: stderr}).execute(args)
}

func (a *app) execute(args []string) int {
	root := a.root()
	a.rootCmd = root
	root.SetArgs(kubectlplugin.Normalize(root, args))
	err := root.Execute()
	var code exitCode
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &code):
		return int(code)
	}
	// Cobra's own errors: unknown commands and flags, bad flag values.
	_, _ = fmt.Fprintf(a.stderr, "kubectl-sandbox: %v\n", err)
	if strings.HasPrefix(err.Error(), "unknown command") {
		_, _ = fmt.Fprintln(a.stderr, `Run "kubectl-sandbox --help" for the commands.`)
	}
	return exitUsage
}

// stop reports whether a test's parsed hook ends the command here.
func (a *app) stop(cmd *cobra.Command, o any) bool {
	return a.parsed != nil && a.parsed(cmd.CommandPath(), o)
}

func (a *app) root() *cobra.Command {
	root := &cobra.Command{
		Use:           "kubectl-sandbox",
		Short:         "Render, check, run and reach agent-sandbox Sandboxes",
		Long:          rootLong,
		SilenceErrors: true,
		SilenceUsage:  true,
		// kubectl runs plugins as kubectl-sandbox; usage shows "kubectl sandbox".
		Annotations: map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl sandbox"},
	}
	root.SetIn(a.stdin)
	root.SetOut(a.stdout)
	root.SetErr(a.stderr)
	a.kube = genericclioptions.NewConfigFlags(true)
	a.kube.AddFlags(root.PersistentFlags())
	_ = root.RegisterFlagCompletionFunc("namespace", a.completeNamespaces)
	root.AddGroup(&cobra.Group{ID: "manifests", Title: "Manifests:"},
		&cobra.Group{ID: "sandboxes", Title: "Sandboxes:"}, &cobra.Group{ID: "local", Title: "Local cluster:"})
	for _, c := range a.manifestCommands() {
		c.GroupID = "manifests"
		root.AddCommand(c)
	}
	for _, c := range []*cobra.Command{a.execCmd(), a.cpCmd()} {
		c.GroupID = "sandboxes"
		root.AddCommand(c)
	}
	for _, c := range []*cobra.Command{a.upCmd(), a.downCmd(), a.kubeletCmd()} {
		c.GroupID = "local"
		root.AddCommand(c)
	}
	root.AddCommand(&cobra.Command{
		Use: "version", Short: "Print the version", Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			_, _ = fmt.Fprintln(a.stdout, "kubectl-sandbox", version)
			return nil
		},
	})
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return a.fail(c, exitUsage, "%v\nRun \"kubectl-sandbox %s --help\" for its flags.", err, commandName(c))
	})
	return root
}

func (a *app) kubeletCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "kubelet [flags]",
		Short: "The local cluster's stand-in kubelet (up starts it): a sandbox-runtime per sandbox Pod",
		Long: "The local cluster's stand-in kubelet (up starts it): runs a sandbox-runtime per\n" +
			"sandbox Pod for kubectl exec/port-forward/logs. Its flags: kubectl-sandbox kubelet -h.",
		DisableFlagParsing: true,
		RunE: func(_ *cobra.Command, args []string) error {
			if code := standin.Main(args, a.stderr); code != 0 {
				return exitCode(code)
			}
			return nil
		},
	}
}

// fail prints "kubectl-sandbox CMD: msg" and ends with code.
func (a *app) fail(cmd *cobra.Command, code int, format string, args ...any) error {
	_, _ = fmt.Fprintf(a.stderr, "kubectl-sandbox %s: %s\n", commandName(cmd), fmt.Sprintf(format, args...))
	return exitCode(code)
}

// commandName is cmd's path without the program's name ("policy check").
func commandName(cmd *cobra.Command) string {
	return strings.TrimPrefix(strings.TrimPrefix(cmd.CommandPath(), cmd.Root().CommandPath()), " ")
}

// kubeFlagsSet lists the kubectl flags given on the command line.
func (a *app) kubeFlagsSet(cmd *cobra.Command) []string {
	var set []string
	cmd.Root().PersistentFlags().VisitAll(func(f *pflag.Flag) {
		if f.Changed {
			set = append(set, "--"+f.Name)
		}
	})
	return set
}
