package devcluster

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// process is one component the cluster runs, as recorded in state.json.
type process struct {
	Name   string   `json:"name"`
	Binary string   `json:"binary"`
	Args   []string `json:"args"`
	PID    int      `json:"pid"`
	Log    string   `json:"log"`
	// Env is added to the environment it inherits.
	Env []string `json:"env,omitempty"`
	// Cgroup, when set, is the cgroup (in every hierarchy) the process is
	// moved into as it starts: a real node's components.
	Cgroup string `json:"cgroup,omitempty"`
	// Restarts counts the times a supervisor started it again.
	Restarts int `json:"restarts,omitempty"`
	// Locks are lock files (lockPort) the process holds while it runs: it
	// inherits their open files, so they are released when it exits.
	Locks []string `json:"locks,omitempty"`
	// held are Locks already taken for its next start (nil: start takes
	// them, without waiting).
	held []*os.File

	// exited is closed when a process this one started has exited; nil for a
	// process read back from state.json. exit then says how it ended.
	exited chan struct{}
	exit   string
	// startedAt is when this process started it (zero: read back).
	startedAt time.Time
}

// start launches the process in its own process group with output to its log
// file. With tied, the child is killed when this process dies (foreground
// `dev up` and tests); detached children outlive it.
func (p *process) start(tied bool) error {
	held := p.held
	p.held = nil
	defer func() {
		for _, f := range held {
			_ = f.Close() // a started child has its own descriptor of each
		}
	}()
	if _, err := os.Stat(p.Binary); err != nil {
		return fmt.Errorf("%s: binary %s not found (run `make build`): %w", p.Name, p.Binary, err)
	}
	logf, err := os.OpenFile(p.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	if held == nil {
		for _, path := range p.Locks {
			f, err := tryLock(path)
			if err != nil {
				return fmt.Errorf("starting %s: %w", p.Name, err)
			}
			held = append(held, f)
		}
	}
	cmd := exec.Command(p.Binary, p.Args...)
	cmd.ExtraFiles = held
	if len(p.Env) > 0 {
		cmd.Env = append(os.Environ(), p.Env...)
	}
	cmd.Stdout = logf
	cmd.Stderr = logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if tied {
		cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", p.Name, err)
	}
	if p.Cgroup != "" {
		if err := joinCgroup(cmd.Process.Pid, p.Cgroup); err != nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			return fmt.Errorf("starting %s: %w", p.Name, err)
		}
	}
	p.PID = cmd.Process.Pid
	p.startedAt = time.Now()
	exited := make(chan struct{})
	p.exited = exited
	// Reap the child when it exits so it does not linger as a zombie.
	go func() {
		err := cmd.Wait()
		if err == nil {
			err = errors.New("exit status 0")
		}
		p.exit = err.Error()
		close(exited)
	}()
	return nil
}

// exitStatus says how a process that has exited ended, as far as known.
func (p *process) exitStatus() string {
	if p.exited != nil {
		select {
		case <-p.exited:
			return p.exit
		default:
		}
	}
	return "exited"
}

// alive reports whether the process still runs. For a process read back from
// state.json it also checks that the PID still runs the recorded binary, so a
// recycled PID is never mistaken for (or killed as) a component.
func (p *process) alive() bool {
	if p.exited != nil {
		select {
		case <-p.exited:
			return false
		default:
			return true
		}
	}
	if p.PID <= 0 {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.PID))
	if err != nil {
		return false
	}
	// Field 3 of /proc/PID/stat is the state; Z is a zombie, already dead.
	if i := bytes.LastIndexByte(stat, ')'); i > 0 && len(stat) > i+2 && stat[i+2] == 'Z' {
		return false
	}
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", p.PID))
	if err != nil {
		return false
	}
	exe = strings.TrimSuffix(exe, " (deleted)")
	want, err := filepath.EvalSymlinks(p.Binary)
	if err != nil {
		want = p.Binary
	}
	return exe == want
}

// stop sends SIGTERM, waits up to grace, then SIGKILLs and waits again.
func (p *process) stop(grace time.Duration) error {
	if !p.alive() {
		return nil
	}
	_ = syscall.Kill(p.PID, syscall.SIGTERM)
	if waitGone(p, grace) {
		return nil
	}
	_ = syscall.Kill(p.PID, syscall.SIGKILL)
	if waitGone(p, 10*time.Second) {
		return nil
	}
	return fmt.Errorf("%s (pid %d) did not exit after SIGKILL", p.Name, p.PID)
}

func waitGone(p *process, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if !p.alive() {
			return true
		}
		time.Sleep(50 * time.Millisecond)
	}
	return !p.alive()
}

// logTail returns the last n lines of the process log.
func (p *process) logTail(n int) string { return p.logLines("", n) }

// logLines is the last n lines of the log that contain match ("": any).
func (p *process) logLines(match string, n int) string {
	b, err := os.ReadFile(p.Log)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if match != "" {
		kept := lines[:0]
		for _, l := range lines {
			if strings.Contains(l, match) {
				kept = append(kept, l)
			}
		}
		lines = kept
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// state is what state.json records about a running cluster.
type state struct {
	Profile    Profile    `json:"profile"`
	Server     string     `json:"server"`
	Ports      Ports      `json:"ports"`
	Kubeconfig string     `json:"kubeconfig"`
	Processes  []*process `json:"processes"`
	// Tied: the components die with the process that started them.
	Tied bool `json:"tied,omitempty"`
	// RealNodes are the nodes that run real containers; Down tears down
	// what their processes leave behind.
	RealNodes []*realNode `json:"realNodes,omitempty"`
	// Supervisor is the process that restarts components that exit
	// (Supervise); Down stops it first.
	Supervisor *process `json:"supervisor,omitempty"`
}

func stateFile(dir string) string { return filepath.Join(dir, "state.json") }

func readState(dir string) (*state, error) {
	b, err := os.ReadFile(stateFile(dir))
	if err != nil {
		return nil, err
	}
	var s state
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("corrupt %s: %w", stateFile(dir), err)
	}
	return &s, nil
}

func writeState(dir string, s *state) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	tmp := stateFile(dir) + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, stateFile(dir))
}

// errNoCluster is returned by Down when the directory holds no cluster.
var errNoCluster = errors.New("no local cluster")
