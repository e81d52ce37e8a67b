package devcluster

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// A fixed port's lock is held by the component's process while it runs, not
// by the process that started it: another cluster waits for it until the
// component exits, and a restart takes it again only when it is free.
func TestFixedPortLockIsHeldWhileTheComponentRuns(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir()) // the lock files live in os.TempDir()
	const port = 18080
	held := func(t *testing.T) bool {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
		defer cancel()
		f, err := lockPort(ctx, port)
		if err != nil {
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("lockPort: %v", err)
			}
			return true
		}
		_ = f.Close()
		return false
	}

	f, err := lockPort(context.Background(), port)
	if err != nil {
		t.Fatal(err)
	}
	p := &process{Name: "holder", Binary: "/bin/sleep", Args: []string{"60"}, Log: filepath.Join(t.TempDir(), "holder.log"),
		Locks: []string{f.Name()}, held: []*os.File{f}}
	if err := p.start(true); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.stop(time.Second) })
	if !held(t) {
		t.Fatal("the lock is free while the component runs")
	}
	if err := p.stop(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	if held(t) {
		t.Fatal("the lock is still held after the component exited")
	}

	// A supervisor's restart takes the lock itself, and refuses to start
	// while another holds it.
	other, err := tryLock(portLockPath(port))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.start(true); err == nil || !errors.Is(err, syscall.EWOULDBLOCK) {
		t.Fatalf("restart while another holds the port: want refused, got %v", err)
	}
	_ = other.Close()
	if err := p.start(true); err != nil {
		t.Fatal(err)
	}
	if !held(t) {
		t.Fatal("the restarted component does not hold the lock")
	}
}
