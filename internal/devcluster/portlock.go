package devcluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"k8s.io/klog/v2"
)

// portLockPath is the machine-wide lock file of a port every local cluster
// would give the same component (a controller's health port no flag moves).
func portLockPath(port int) string {
	return filepath.Join(os.TempDir(), fmt.Sprintf("lockstep-port-%d.lock", port))
}

// lockPort takes the lock of a fixed port, waiting while another local
// cluster's component holds it (two e2e packages side by side each start
// the MPI operator, whose health port is always 8080), until ctx ends. The
// component's process is handed the open file (process.start), so the lock
// is held while that process runs and the kernel releases it when it exits,
// however it ends — also when `dev up` has left it running detached.
func lockPort(ctx context.Context, port int) (*os.File, error) {
	path := portLockPath(port)
	logged := false
	for {
		f, err := tryLock(path)
		if err == nil {
			return f, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, err
		}
		if !logged {
			klog.FromContext(ctx).Info("Waiting for a fixed port another local cluster's component holds", "port", port, "lock", path)
			logged = true
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("port %d is still held by another local cluster's component (lock %s): %w", port, path, context.Cause(ctx))
		case <-time.After(time.Second):
		}
	}
}

// tryLock opens path and takes its exclusive lock without waiting
// (syscall.EWOULDBLOCK when it is held).
func tryLock(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%s is held by another local cluster's component: %w", path, err)
		}
		return nil, fmt.Errorf("locking %s: %w", path, err)
	}
	return f, nil
}
