package localcluster

import (
	"errors"
	"fmt"
	"os"
	"strings"
)

// A port chosen free (FreeAddr) is free only until the process it is
// handed to listens on it: in between, any other process on the machine
// may take it, a parallel test or the local end of an outgoing connection.
// Starts that pick ports therefore try again, on fresh ports, when the
// process reports its listen failed that way.

// startAttempts bounds how often one start is tried with fresh ports.
const startAttempts = 3

// ErrPortTaken marks a start that failed because a port chosen free was
// taken before the process listened on it; choosing again may succeed.
var ErrPortTaken = errors.New("a port chosen free was taken before the process listened on it")

// portTakenError is a start's error whose log says a listen failed
// because the address was in use. ours says the address was one the
// starter chose itself, so it can retry without its caller.
type portTakenError struct {
	err  error
	ours bool
}

func (e *portTakenError) Error() string { return e.err.Error() }

func (e *portTakenError) Unwrap() []error { return []error{e.err, ErrPortTaken} }

// startFailed kills a process that did not become ready and returns err
// with the end of its log, marked when one of its ports was taken
// (withPortTaken; chosen are the addresses its starter chose).
func startFailed(what string, p *os.Process, err error, logPath string, chosen ...string) error {
	_ = p.Kill()
	out, _ := os.ReadFile(logPath)
	return withPortTaken(fmt.Errorf("%s: %w (log %s)\n%s", what, err, logPath, lastLines(string(out), 20)), string(out), chosen...)
}

// withPortTaken returns err marked as a taken port when the process's log
// reports an address in use, and whether that address is one of chosen.
func withPortTaken(err error, log string, chosen ...string) error {
	line := ""
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, "address already in use") {
			line = l
		}
	}
	if line == "" {
		return err
	}
	e := &portTakenError{err: err}
	for _, addr := range chosen {
		// "listen tcp 127.0.0.1:4317: bind: ...": the address ends at
		// the colon, so 127.0.0.1:43170 is not taken for it.
		if strings.Contains(line, addr+":") {
			e.ours = true
		}
	}
	return e
}

// RetryPortTaken runs start up to startAttempts times while it fails with
// ErrPortTaken; start chooses its ports afresh on every call.
func RetryPortTaken[T any](start func() (T, error)) (T, error) {
	for attempt := 1; ; attempt++ {
		v, err := start()
		if err == nil || attempt == startAttempts || !errors.Is(err, ErrPortTaken) {
			return v, err
		}
	}
}
