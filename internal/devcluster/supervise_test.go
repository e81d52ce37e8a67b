package devcluster

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestNextBackoff(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	cases := map[string]struct {
		last    time.Duration
		started time.Time
		want    time.Duration
	}{
		"first exit":                                   {started: t0.Add(-time.Second), want: backoffInitial},
		"first exit of a component read back":          {want: backoffInitial},
		"exits again soon: doubles":                    {last: 4 * time.Second, started: t0.Add(-time.Second), want: 8 * time.Second},
		"keeps exiting: capped":                        {last: backoffMax, started: t0.Add(-time.Second), want: backoffMax},
		"ran for a minute before exiting: starts over": {last: backoffMax, started: t0.Add(-backoffReset), want: backoffInitial},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, nextBackoff(tc.last, tc.started, t0)); diff != "" {
				t.Errorf("(-want,+got):\n%s", diff)
			}
		})
	}
}

// syncBuffer is an io.Writer safe to read while Supervise writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// testCluster is a cluster in a temporary directory whose components are
// shell processes.
func testCluster(t *testing.T, procs ...*process) *Cluster {
	t.Helper()
	l := layout{dir: t.TempDir()}
	if err := os.MkdirAll(l.logs(), 0o755); err != nil {
		t.Fatal(err)
	}
	c := &Cluster{layout: l, state: &state{Tied: true}}
	for _, p := range procs {
		p.Binary, p.Log = "/bin/sh", l.log(p.Name)
		if err := c.launch(p, true); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _ = c.stopAll() })
	return c
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestSuperviseRestartsWhatExits: a component that exits is started again
// with its arguments and its log kept; one that runs is left alone; the
// restarts are recorded in state.json; the supervisor records itself.
func TestSuperviseRestartsWhatExits(t *testing.T) {
	crashy := &process{Name: "crashy", Args: []string{"-c", "echo running; exit 3"}}
	steady := &process{Name: "steady", Args: []string{"-c", "exec sleep 300"}}
	c := testCluster(t, crashy, steady)
	steadyPID := steady.PID
	ctx, cancel := context.WithCancel(context.Background())
	out := &syncBuffer{}
	done := make(chan error)
	go func() { done <- c.Supervise(ctx, out) }()
	// Restart 2 is recorded before its run prints: wait for the third
	// run's output too, or stopping the supervisor may end that run first.
	waitFor(t, "crashy restarted twice, as recorded in state.json, its third run's output logged", func() bool {
		s, err := readState(c.layout.dir)
		log, _ := os.ReadFile(filepath.Join(c.layout.logs(), "crashy.log"))
		return err == nil && s.Processes[0].Restarts >= 2 && strings.Count(string(log), "running\n") >= 3
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	s, err := readState(c.layout.dir)
	if err != nil {
		t.Fatal(err)
	}
	if s.Supervisor == nil || s.Supervisor.PID != os.Getpid() {
		t.Errorf("state.json: want this process recorded as the supervisor, got %+v", s.Supervisor)
	}
	if steady.PID != steadyPID || steady.Restarts != 0 || !steady.alive() {
		t.Errorf("the running component was touched: pid %d → %d, restarts %d", steadyPID, steady.PID, steady.Restarts)
	}
	log, err := os.ReadFile(filepath.Join(c.layout.logs(), "crashy.log"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"--- lockstep dev: crashy stopped (exit status 3)", "starting it again (restart 2) ---"} {
		if !strings.Contains(string(log), want) {
			t.Errorf("crashy's log: want %q, got:\n%s", want, log)
		}
	}
	if n := strings.Count(string(log), "running\n"); n < 3 {
		t.Errorf("crashy's log: want the output of its 3 runs kept, got %d:\n%s", n, log)
	}
	for _, want := range []string{"crashy stopped (exit status 3); starting it again in 1s", "crashy started again", "starting it again in 2s"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("supervisor output: want %q, got:\n%s", want, out.String())
		}
	}
}

// TestSuperviseRefusesASecondSupervisor: two supervisors would start a
// component twice.
func TestSuperviseRefusesASecondSupervisor(t *testing.T) {
	other := &process{Name: "other-supervisor", Args: []string{"-c", "exec sleep 300"}}
	c := testCluster(t, other)
	c.state.Supervisor = other
	err := c.Supervise(context.Background(), &syncBuffer{})
	if err == nil || !strings.Contains(err.Error(), "already supervised by other-supervisor") {
		t.Fatalf("want a refusal naming the supervisor, got %v", err)
	}
}

// TestKillAndStart: what fault tests do to a component.
func TestKillAndStart(t *testing.T) {
	steady := &process{Name: "steady", Args: []string{"-c", "exec sleep 300"}}
	c := testCluster(t, steady)
	first := steady.PID
	if err := c.Kill("steady"); err != nil {
		t.Fatal(err)
	}
	if steady.alive() {
		t.Fatal("alive after Kill")
	}
	if !strings.Contains(c.Failed().Error(), "steady") {
		t.Errorf("Failed: want steady named, got %v", c.Failed())
	}
	if err := c.Start("steady"); err != nil {
		t.Fatal(err)
	}
	if !steady.alive() || steady.PID == first || steady.Restarts != 1 {
		t.Errorf("after Start: alive %v, pid %d (was %d), restarts %d", steady.alive(), steady.PID, first, steady.Restarts)
	}
	if err := c.Start("steady"); err == nil {
		t.Error("Start of a running component: want an error")
	}
}
