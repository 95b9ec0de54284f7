package localcluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// createLockName is the file, in the system's temporary directory, whose
// lock every local cluster holds while kwokctl creates it. kwokctl picks
// each component's port by finding one free at that moment; two clusters
// created at once on one machine (two test packages, two terminals) could
// pick the same one, and the component that binds second fails (a kwok
// controller that cannot serve leaves every node NotReady). Held until
// kwokctl returns, when every component is listening, the lock makes the
// next cluster see those ports taken.
const createLockName = "agent-sandbox-kwokctl-create.lock"

// lockCreate takes the machine-wide create lock, waiting for it until ctx
// ends; unlock releases it.
func lockCreate(ctx context.Context) (unlock func(), err error) {
	f, err := os.OpenFile(filepath.Join(os.TempDir(), createLockName), os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return nil, fmt.Errorf("opening the cluster create lock: %w", err)
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN); _ = f.Close() }, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			_ = f.Close()
			return nil, fmt.Errorf("locking %s: %w", f.Name(), err)
		}
		select {
		case <-ctx.Done():
			_ = f.Close()
			return nil, fmt.Errorf("waiting for another local cluster to be created: %w", ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}
