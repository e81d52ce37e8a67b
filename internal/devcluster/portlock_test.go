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

// useLockDir points the fixed ports' lock files at a directory of the
// test's own.
func useLockDir(t *testing.T) {
	t.Helper()
	old := portLockDir
	portLockDir = t.TempDir()
	t.Cleanup(func() { portLockDir = old })
}

// portHeld reports whether the lock of port is held, without waiting.
func portHeld(t *testing.T, port int) bool {
	t.Helper()
	f, err := tryLock(portLockPath(port))
	if err == nil {
		_ = f.Close()
		return false
	}
	if !errors.Is(err, syscall.EWOULDBLOCK) {
		t.Fatal(err)
	}
	return true
}

// startHolder takes port's lock and starts a component that holds it for
// seconds, as StartController does.
func startHolder(t *testing.T, port int, seconds string) *process {
	t.Helper()
	f, _, err := lockPort(context.Background(), port)
	if err != nil {
		t.Fatal(err)
	}
	p := &process{Name: "holder", Binary: "/bin/sleep", Args: []string{seconds}, Log: filepath.Join(t.TempDir(), "holder.log"),
		Locks: []string{f.Name()}, held: []*os.File{f}}
	if err := p.start(true); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.stop(time.Second) })
	return p
}

// A fixed port's lock is held by the component's process while it runs, not
// by the process that started it, and is released when it exits; a
// restart takes it again only when it is free.
func TestFixedPortLockIsHeldWhileTheComponentRuns(t *testing.T) {
	useLockDir(t)
	const port = 18080
	p := startHolder(t, port, "60")
	if !portHeld(t, port) {
		t.Fatal("the lock is free while the component runs")
	}
	if err := p.stop(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	if portHeld(t, port) {
		t.Fatal("the lock is still held after the component exited")
	}

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
	if !portHeld(t, port) {
		t.Fatal("the restarted component does not hold the lock")
	}
}

// Another cluster's wait for the port outlasts the deadline it was given to
// start its component, ends when the holder exits, and moves that deadline
// by the time waited; a cancellation ends it at once.
func TestFixedPortWaitOutlastsTheStartDeadline(t *testing.T) {
	useLockDir(t)
	const port = 18081
	startHolder(t, port, "2")

	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	deadline, _ := ctx.Deadline()
	g, waited, err := lockPort(ctx, port)
	if err != nil {
		t.Fatalf("want the port once its holder exits, got %v", err)
	}
	_ = g.Close()
	if waited < time.Second {
		t.Errorf("took the port after %s, while its holder runs 2 s", waited)
	}
	later, stop := postpone(ctx, waited)
	defer stop()
	if d, _ := later.Deadline(); !d.Equal(deadline.Add(waited)) {
		t.Errorf("postponed deadline %s, want %s", d, deadline.Add(waited))
	}
	if later.Err() != nil {
		t.Errorf("the postponed context ended with its parent's deadline: %v", later.Err())
	}

	// Cancelled, not timed out: the wait ends, and so does a postponed context.
	other, err := tryLock(portLockPath(port))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	cctx, ccancel := context.WithCancel(context.Background())
	dctx, dcancel := context.WithTimeout(cctx, time.Hour)
	defer dcancel()
	child, cstop := postpone(dctx, time.Minute)
	defer cstop()
	time.AfterFunc(200*time.Millisecond, ccancel)
	if _, _, err := lockPort(cctx, port); !errors.Is(err, context.Canceled) {
		t.Errorf("a cancelled wait: want context.Canceled, got %v", err)
	}
	select {
	case <-child.Done():
	case <-time.After(5 * time.Second):
		t.Error("a postponed context outlived its parent's cancellation")
	}
}
