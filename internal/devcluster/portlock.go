package devcluster

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"k8s.io/klog/v2"
)

// portLockDir holds the machine-wide lock files of fixed ports: one
// directory whatever TMPDIR each cluster's process has (a variable so that
// tests use their own).
var portLockDir = "/tmp"

// fixedPortWait bounds how long a cluster waits for another's component to
// give up a fixed port: about the longest e2e package, which holds it for
// its whole run.
const fixedPortWait = 20 * time.Minute

// portLockPath is the lock file of a port every local cluster would give
// the same component (a controller's health port no flag moves).
func portLockPath(port int) string {
	return filepath.Join(portLockDir, fmt.Sprintf("lockstep-port-%d.lock", port))
}

// lockPort takes the lock of a fixed port, waiting while another local
// cluster's component holds it (two e2e packages side by side each start
// the MPI operator, whose health port is always 8080), and says how long it
// waited. The wait is bounded by fixedPortWait, not by ctx's deadline, which
// is meant for starting the component (see postpone); ctx's cancellation
// ends it. The component's process is handed the open file
// (process.start), so the lock is held while that process runs and the
// kernel releases it when the process exits, however it ends — also when
// `dev up` has left it running detached.
func lockPort(ctx context.Context, port int) (*os.File, time.Duration, error) {
	path := portLockPath(port)
	start := time.Now()
	logged := false
	for {
		f, err := tryLock(path)
		if err == nil {
			return f, time.Since(start), nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, 0, err
		}
		if !logged {
			klog.FromContext(ctx).Info("Waiting for a fixed port another local cluster's component holds, until it exits", "port", port, "lock", path, "atMost", fixedPortWait)
			logged = true
		}
		if time.Since(start) > fixedPortWait {
			return nil, 0, fmt.Errorf("port %d is still held by another local cluster's component after %s (lock %s: `fuser %s` names the process)", port, fixedPortWait, path, path)
		}
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.Canceled) {
				return nil, 0, fmt.Errorf("waiting for port %d (lock %s): %w", port, path, context.Cause(ctx))
			}
			ctx = context.WithoutCancel(ctx) // only its deadline passed: wait on
		case <-time.After(time.Second):
		}
	}
}

// postpone is ctx with its deadline moved d later (the time spent waiting
// for a fixed port), still cancelled when ctx is cancelled.
func postpone(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	deadline, ok := ctx.Deadline()
	if !ok || d <= 0 {
		return context.WithCancel(ctx)
	}
	later, cancel := context.WithDeadline(context.WithoutCancel(ctx), deadline.Add(d))
	stop := context.AfterFunc(ctx, func() {
		if errors.Is(ctx.Err(), context.Canceled) {
			cancel()
		}
	})
	return later, func() { stop(); cancel() }
}

// tryLock opens path (creating it when missing) and takes its exclusive lock
// without waiting (syscall.EWOULDBLOCK when it is held). The file is opened
// read-only, which flock needs, so that a lock file another user created
// serves too.
func tryLock(path string) (*os.File, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		f, err = os.OpenFile(path, os.O_CREATE|os.O_RDONLY, 0o644)
	}
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
