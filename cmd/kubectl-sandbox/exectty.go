package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/term"

	sdk "github.com/agentsandbox/reconciler/dataplane/client"
	"github.com/agentsandbox/reconciler/dataplane/sandboxd/processpb"
)

// runInteractive is exec -i/-t: the program runs through sandboxd's Start
// (sdk.Interactive, with a PTY for -t) and this terminal is put in raw mode
// for it, so that keys, Ctrl-C included, reach the program and not this
// process; SIGWINCH resizes the program's terminal.
func runInteractive(ctx context.Context, proc processpb.ProcessServiceClient, argv []string, interactive, tty bool, stdout, stderr io.Writer) (int, error) {
	s := &sdk.Interactive{Argv: argv, TTY: tty, Stdout: stdout, Stderr: stderr}
	if interactive {
		s.Stdin = os.Stdin
	}
	fd := int(os.Stdin.Fd())
	if tty && term.IsTerminal(fd) {
		s.Size = func() (uint32, uint32, bool) {
			w, h, err := term.GetSize(fd)
			return uint32(max(w, 0)), uint32(max(h, 0)), err == nil && w > 0 && h > 0
		}
		winch := make(chan os.Signal, 1)
		signal.Notify(winch, syscall.SIGWINCH)
		defer signal.Stop(winch)
		resizes := make(chan struct{}, 1)
		ctx, stop := context.WithCancel(ctx)
		defer stop()
		go func() {
			for {
				select {
				case <-ctx.Done():
					return
				case <-winch:
					select {
					case resizes <- struct{}{}:
					default: // one pending resize reads the latest size
					}
				}
			}
		}()
		s.Resizes = resizes
		if interactive {
			old, err := term.MakeRaw(fd)
			if err != nil {
				return 0, fmt.Errorf("raw terminal: %w", err)
			}
			defer func() { _ = term.Restore(fd, old) }()
		}
	}
	return s.Run(ctx, proc)
}
