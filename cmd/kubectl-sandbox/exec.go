package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/agentsandbox/reconciler/cmd/kubectlplugin"
)

const execLong = `Runs a command in a sandbox through its runtime (the Go SDK, as programs do)
and prints what it printed, stdout and stderr, then exits with its exit code.
A SandboxClaim resolves to the Sandbox it is bound to (waiting for it to be
ready); any other name is a Sandbox.

The runtime splits the command like a POSIX shell but runs no shell; the
arguments arrive as given. For pipes or variables, run a shell yourself:
  kubectl sandbox exec my-claim -- sh -c 'ls | wc -l'

With -i (send this terminal's input) or -t (a terminal: a PTY in the
sandbox, this terminal in raw mode, its size kept in step), the command runs
through sandboxd's streaming Start over a port-forward to the Pod's port
9090 (so the sandbox's runtime must serve sandboxd), output as it comes:
  kubectl sandbox exec -it my-claim -- sh

Without "--", the flags come before the name and the command follows it.`

// execOptions are exec's parsed flags and arguments.
type execOptions struct {
	sandbox    sandboxFlags
	name       string
	command    []string
	stdin, tty bool
}

func (a *app) execCmd() *cobra.Command {
	var o execOptions
	var both bool
	cmd := &cobra.Command{
		Use:               "exec [-it] CLAIM|SANDBOX -- COMMAND [ARG...]",
		Short:             "Run a command in a sandbox; print its output, exit with its code",
		Long:              execLong,
		Args:              cobra.ArbitraryArgs,
		Annotations:       map[string]string{kubectlplugin.ArgsAfterName: "true"},
		ValidArgsFunction: a.completeNames(false),
		RunE: func(cmd *cobra.Command, args []string) error {
			pos, command := args, []string(nil)
			if dash := cmd.ArgsLenAtDash(); dash >= 0 {
				pos, command = args[:dash], args[dash:]
			}
			if len(pos) > 1 {
				return a.fail(cmd, exitUsage, "want one CLAIM or SANDBOX before --, got %q", pos)
			}
			if len(pos) == 0 || len(command) == 0 {
				return a.fail(cmd, exitUsage, "want CLAIM|SANDBOX -- COMMAND [ARG...]")
			}
			o.name, o.command = pos[0], command
			o.stdin, o.tty = o.stdin || both, o.tty || both
			o.sandbox.resolve(a)
			if a.stop(cmd, &o) {
				return nil
			}
			return a.runExec(cmd, &o)
		},
	}
	fs := cmd.Flags()
	o.sandbox.bind(fs)
	fs.BoolVarP(&o.stdin, "stdin", "i", false, "send this terminal's input to the command (through sandboxd)")
	fs.BoolVarP(&o.tty, "tty", "t", false, "run the command on a terminal (a PTY, through sandboxd)")
	fs.BoolVar(&both, "it", false, "same as -i -t")
	fs.BoolVar(&both, "ti", false, "same as -i -t")
	_ = fs.MarkHidden("it")
	_ = fs.MarkHidden("ti")
	return cmd
}

// runExec is "kubectl-sandbox exec".
func (a *app) runExec(cmd *cobra.Command, o *execOptions) error {
	f := &o.sandbox
	interactive := o.stdin || o.tty
	if interactive && f.router != "" {
		return a.fail(cmd, exitUsage, "-i and -t speak sandboxd straight to the Pod; --router does not apply")
	}
	if interactive {
		f.sandboxd = true
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	sb, err := openSandbox(ctx, f, o.name)
	if err != nil {
		return sandboxError(a.stderr, "exec", err)
	}
	defer func() { _ = sb.Close(context.WithoutCancel(ctx)) }()
	if interactive {
		proc, err := sb.ProcessService()
		if err != nil {
			return sandboxError(a.stderr, "exec", err)
		}
		code, err := runInteractive(ctx, proc, o.command, o.stdin, o.tty, a.stdout, a.stderr)
		if err != nil {
			return sandboxError(a.stderr, "exec", err)
		}
		return exitErr(code)
	}
	res, err := sb.Run(ctx, shellJoin(o.command))
	if err != nil {
		return sandboxError(a.stderr, "exec", err)
	}
	_, _ = io.WriteString(a.stdout, res.Stdout)
	_, _ = io.WriteString(a.stderr, res.Stderr)
	return exitErr(res.ExitCode)
}

// exitErr ends a command with code, nil for 0.
func exitErr(code int) error {
	if code == exitOK {
		return nil
	}
	return exitCode(code)
}

// sandboxError reports an error of exec or cp: 2 for bad input, else 1.
func sandboxError(stderr io.Writer, cmd string, err error) error {
	_, _ = fmt.Fprintf(stderr, "kubectl-sandbox %s: %v\n", cmd, err)
	var in *inputError
	if errors.As(err, &in) {
		return exitCode(exitUsage)
	}
	return exitCode(exitFindings)
}

// shellJoin quotes args so that a POSIX shell split (upstream's runtime
// uses Python's shlex.split) gives them back unchanged.
func shellJoin(args []string) string {
	quoted := make([]string, len(args))
	for i, a := range args {
		quoted[i] = shellQuote(a)
	}
	return strings.Join(quoted, " ")
}

func shellQuote(s string) string {
	if s == "" {
		return "''"
	}
	safe := func(r rune) bool {
		return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("@%+=:,./_-", r)
	}
	if strings.IndexFunc(s, func(r rune) bool { return !safe(r) }) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'"'"'`) + "'"
}
