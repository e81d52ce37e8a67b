package devcluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// The restart policy of supervised components: a kubelet's restartPolicy
// Always, with a back-off sized for a dev cluster rather than a node's
// (a kubelet starts at 10 s and caps at 5 min).
const (
	// backoffInitial is the wait before the first restart, and before the
	// next one once a component has run for backoffReset.
	backoffInitial = time.Second
	// backoffMax caps the doubling of the wait between restarts of a
	// component that keeps exiting (an API server that stays down).
	backoffMax   = 30 * time.Second
	backoffReset = time.Minute
	// superviseEvery is how often the components are looked at.
	superviseEvery = 250 * time.Millisecond
)

// Supervise keeps every component running until ctx ends, as a kubelet
// keeps a static pod's containers: a component that exits (a crash, a kill,
// a Lockstep component that lost its lease during an API outage) is started
// again with the same arguments, its output appended to the same log after a
// line saying why, after a back-off that doubles from 1 s up to 30 s and
// starts over once it has run for a minute. It records itself in state.json
// as the cluster's supervisor, so Down stops it before the components, and
// reports each exit and restart to out. It returns when ctx ends, leaving
// the components as they are.
func (c *Cluster) Supervise(ctx context.Context, out io.Writer) error {
	self, err := selfProcess(c.layout)
	if err != nil {
		return err
	}
	c.mu.Lock()
	if sup := c.state.Supervisor; sup != nil && sup.PID != self.PID && sup.alive() {
		c.mu.Unlock()
		return fmt.Errorf("the cluster in %s is already supervised by %s", c.layout.dir, sup.describe())
	}
	c.state.Supervisor = self
	err = writeState(c.layout.dir, c.state)
	c.mu.Unlock()
	if err != nil {
		return err
	}
	s := &supervision{c: c, out: out, due: map[*process]time.Time{}, wait: map[*process]time.Duration{}}
	t := time.NewTicker(superviseEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			s.pass(time.Now())
		}
	}
}

// supervision is the state of one Supervise loop.
type supervision struct {
	c   *Cluster
	out io.Writer
	// due is when each exited component starts again; wait is its last
	// back-off.
	due  map[*process]time.Time
	wait map[*process]time.Duration
}

// pass looks at every component once: an exited one gets a restart time,
// one whose time has come is started.
func (s *supervision) pass(now time.Time) {
	for _, p := range s.c.state.Processes {
		if p.alive() {
			continue
		}
		at, waiting := s.due[p]
		if !waiting {
			s.wait[p] = nextBackoff(s.wait[p], p.startedAt, now)
			s.due[p] = now.Add(s.wait[p])
			fmt.Fprintf(s.out, "%s %s stopped (%s); starting it again in %s\n", now.Format(time.TimeOnly), p.Name, p.exitStatus(), s.wait[p])
			continue
		}
		if now.Before(at) {
			continue
		}
		delete(s.due, p)
		if err := s.c.restart(p); err != nil {
			s.wait[p] = min(2*s.wait[p], backoffMax)
			s.due[p] = now.Add(s.wait[p])
			fmt.Fprintf(s.out, "%s %s could not be started (%v); trying again in %s\n", now.Format(time.TimeOnly), p.Name, err, s.wait[p])
			continue
		}
		fmt.Fprintf(s.out, "%s %s started again (pid %d, restart %d)\n", now.Format(time.TimeOnly), p.Name, p.PID, p.Restarts)
	}
}

// nextBackoff is the wait before restarting a component that exited now,
// after last (0: never restarted) and having started at started (zero:
// not known).
func nextBackoff(last time.Duration, started, now time.Time) time.Duration {
	if last == 0 || !started.IsZero() && now.Sub(started) >= backoffReset {
		return backoffInitial
	}
	return min(2*last, backoffMax)
}

// restart starts an exited component again and records it.
func (c *Cluster) restart(p *process) error {
	if logf, err := os.OpenFile(p.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); err == nil {
		fmt.Fprintf(logf, "\n--- lockstep dev: %s stopped (%s) at %s; starting it again (restart %d) ---\n",
			p.Name, p.exitStatus(), time.Now().Format(time.RFC3339), p.Restarts+1)
		_ = logf.Close()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := p.start(c.state.Tied); err != nil {
		return err
	}
	p.Restarts++
	return writeState(c.layout.dir, c.state)
}

// Kill stops a component at once (SIGKILL), as a crash would. It stays
// down until Start, or its supervisor, starts it again.
func (c *Cluster) Kill(component string) error {
	p := c.process(component)
	if p == nil {
		return fmt.Errorf("no component %s", component)
	}
	if err := syscall.Kill(p.PID, syscall.SIGKILL); err != nil {
		return fmt.Errorf("killing %s: %w", p.describe(), err)
	}
	if !waitGone(p, 10*time.Second) {
		return fmt.Errorf("%s did not exit after SIGKILL", p.describe())
	}
	return nil
}

// Start starts a component that is not running again, with its
// arguments, appending to its log. It does not wait for it to be ready.
func (c *Cluster) Start(component string) error {
	p := c.process(component)
	if p == nil {
		return fmt.Errorf("no component %s", component)
	}
	if p.alive() {
		return fmt.Errorf("%s is running", p.describe())
	}
	return c.restart(p)
}

func (c *Cluster) process(name string) *process {
	for _, p := range c.state.Processes {
		if p.Name == name {
			return p
		}
	}
	return nil
}

// selfProcess is this process as state.json records a supervisor.
func selfProcess(l layout) (*process, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	if exe, err = filepath.EvalSymlinks(exe); err != nil {
		return nil, err
	}
	return &process{Name: "supervisor", Binary: exe, PID: os.Getpid(), Log: l.log("supervisor")}, nil
}

// StartSupervisor starts command (`lockstep dev supervise …` for this
// state directory) as a process of its own session, which outlives the
// caller, its output in logs/supervisor.log, and returns once it has
// recorded itself in state.json as the supervisor.
func (c *Cluster) StartSupervisor(ctx context.Context, command []string) error {
	logPath := c.layout.log("supervisor")
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(command[0], command[1:]...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting the supervisor: %w", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	sup := &process{Name: "supervisor", Binary: command[0], PID: cmd.Process.Pid, Log: logPath, exited: exited}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		if s, err := readState(c.layout.dir); err == nil && s.Supervisor != nil && s.Supervisor.PID == sup.PID {
			c.mu.Lock()
			c.state.Supervisor = s.Supervisor
			c.mu.Unlock()
			return nil
		}
		select {
		case <-exited:
			return &ComponentError{Component: sup.Name, Log: logPath, Tail: sup.logTail(30), Err: errors.New("process exited")}
		case <-ctx.Done():
			_ = sup.stop(5 * time.Second)
			return &ComponentError{Component: sup.Name, Log: logPath, Tail: sup.logTail(30), Err: fmt.Errorf("did not record itself: %w", ctx.Err())}
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Supervise supervises the cluster recorded in dir (Cluster.Supervise),
// for a supervisor started apart from `dev up`.
func Supervise(ctx context.Context, dir string, out io.Writer) error {
	s, err := readState(dir)
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("%w in %s", errNoCluster, dir)
	}
	if err != nil {
		return err
	}
	c := &Cluster{layout: layout{dir: dir}, state: s}
	return c.Supervise(ctx, out)
}
