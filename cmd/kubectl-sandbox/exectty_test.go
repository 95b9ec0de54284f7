package main

import (
	"strings"
	"testing"
)

func TestExecInteractiveFlags(t *testing.T) {
	withFakeSandbox(t)
	if _, stderr, code := runCLI(t, "", "exec", "-it", "--router", "http://r", "sb", "--", "sh"); code != exitUsage || !strings.Contains(stderr, "--router does not apply") {
		t.Errorf("exec -it --router = %d, %s", code, stderr)
	}
	// -it over a runtime without sandboxd (the fake speaks only the legacy
	// protocol, through Dial): a clear error, not a hang.
	if _, stderr, code := runCLI(t, "", "exec", "-it", "sb", "--", "sh"); code != exitFindings || !strings.Contains(stderr, "sandboxd") {
		t.Errorf("exec -it without sandboxd = %d, %s", code, stderr)
	}
}
