package tests

import (
	"os"
	"testing"
)

// ProcCPU reads this process's own CPU and faults, and errs for a process
// that does not exist.
func TestProcCPU(t *testing.T) {
	cpu, faults, err := ProcCPU(os.Getpid()) // a running test has faulted in pages
	if err != nil || cpu < 0 || faults <= 0 {
		t.Fatalf("ProcCPU(self) = %v s, %d faults, %v", cpu, faults, err)
	}
	if _, _, err := ProcCPU(1 << 30); err == nil {
		t.Fatal("ProcCPU of no process: no error")
	}
}
