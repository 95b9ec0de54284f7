// Package shlex splits a command line into words exactly as Python's
// shlex.split does, which is how upstream's legacy runtime turns the
// command string of POST /execute into a program and its arguments. The
// runtime (dataplane/runtime) runs commands with it, and the SDK
// (dataplane/client) uses it to send a command string as sandboxd's argv,
// so that one string means the same program and arguments on both
// protocols.
//
// It is pure (the standard library only, no I/O) and must never expand
// anything: no variables, globs, pipes or redirections.
package shlex
