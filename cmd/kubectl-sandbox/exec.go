package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
)

const execUsage = `Usage: kubectl-sandbox exec [flags] CLAIM|SANDBOX -- COMMAND [ARG...]

Runs a command in a sandbox through its runtime (the Go SDK, as programs do)
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

Flags:
`

// runExec is "kubectl-sandbox exec".
func runExec(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("kubectl-sandbox exec", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { _, _ = fmt.Fprint(stderr, execUsage); fs.PrintDefaults() }
	var f sandboxFlags
	f.bind(fs)
	var stdinFlag, ttyFlag, both bool
	fs.BoolVar(&stdinFlag, "i", false, "send this terminal's input to the command (through sandboxd)")
	fs.BoolVar(&stdinFlag, "stdin", false, "same as -i")
	fs.BoolVar(&ttyFlag, "t", false, "run the command on a terminal (a PTY, through sandboxd)")
	fs.BoolVar(&ttyFlag, "tty", false, "same as -t")
	fs.BoolVar(&both, "it", false, "same as -i -t")
	fs.BoolVar(&both, "ti", false, "same as -i -t")
	var name string
	var command []string
	if i := slices.Index(args, "--"); i >= 0 {
		pos, err := parseInterleaved(fs, args[:i])
		if err != nil {
			return usageExit(err)
		}
		if len(pos) != 1 {
			_, _ = fmt.Fprintf(stderr, "kubectl-sandbox exec: want one CLAIM or SANDBOX before --, got %q\n", pos)
			return exitUsage
		}
		name, command = pos[0], args[i+1:]
	} else {
		// Without --, flags come first and the command follows the name.
		if err := fs.Parse(args); err != nil {
			return usageExit(err)
		}
		if fs.NArg() > 0 {
			name, command = fs.Arg(0), fs.Args()[1:]
		}
	}
	if name == "" || len(command) == 0 {
		_, _ = fmt.Fprintln(stderr, "kubectl-sandbox exec: want CLAIM|SANDBOX -- COMMAND [ARG...]")
		return exitUsage
	}
	stdinFlag, ttyFlag = stdinFlag || both, ttyFlag || both
	interactive := stdinFlag || ttyFlag
	if interactive && f.router != "" {
		_, _ = fmt.Fprintln(stderr, "kubectl-sandbox exec: -i and -t speak sandboxd straight to the Pod; --router does not apply")
		return exitUsage
	}
	if interactive {
		f.sandboxd = true
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	sb, err := openSandbox(ctx, &f, name)
	if err != nil {
		return sandboxError(stderr, "exec", err)
	}
	defer func() { _ = sb.Close(context.WithoutCancel(ctx)) }()
	if interactive {
		proc, err := sb.ProcessService()
		if err != nil {
			return sandboxError(stderr, "exec", err)
		}
		code, err := runInteractive(ctx, proc, command, stdinFlag, ttyFlag, stdout, stderr)
		if err != nil {
			return sandboxError(stderr, "exec", err)
		}
		return code
	}
	res, err := sb.Run(ctx, shellJoin(command))
	if err != nil {
		return sandboxError(stderr, "exec", err)
	}
	_, _ = io.WriteString(stdout, res.Stdout)
	_, _ = io.WriteString(stderr, res.Stderr)
	return res.ExitCode
}

func usageExit(err error) int {
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	return exitUsage
}

// sandboxError reports an error of exec or cp: 2 for bad input, else 1.
func sandboxError(stderr io.Writer, cmd string, err error) int {
	_, _ = fmt.Fprintf(stderr, "kubectl-sandbox %s: %v\n", cmd, err)
	var in *inputError
	if errors.As(err, &in) {
		return exitUsage
	}
	return exitFindings
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
