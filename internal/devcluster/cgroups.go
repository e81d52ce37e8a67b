package devcluster

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The cgroups and mounts of real nodes. A real node's processes and
// containers live in one cgroup per hierarchy (cgroup v1: one per
// controller; cgroup v2: one), so that tearing it down finds every process
// of it, however it was started (containerd's shims re-parent themselves).

// cgroupMounts are the mount points of this machine's cgroup hierarchies,
// each with whether it is cgroup v2.
func cgroupMounts() (map[string]bool, error) {
	out := map[string]bool{}
	err := eachMount(func(mountPoint, fsType string) {
		switch fsType {
		case "cgroup":
			out[mountPoint] = false
		case "cgroup2":
			out[mountPoint] = true
		}
	})
	if err == nil && len(out) == 0 {
		err = errors.New("no cgroup hierarchy is mounted")
	}
	return out, err
}

// eachMount calls f with the mount point and file system type of every mount
// of this process's mount namespace.
func eachMount(f func(mountPoint, fsType string)) error {
	file, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return err
	}
	defer file.Close()
	s := bufio.NewScanner(file)
	s.Buffer(make([]byte, 64*1024), 1024*1024)
	for s.Scan() {
		// ID parent major:minor root mountpoint options [optional…] - fstype source superoptions
		fields := strings.Fields(s.Text())
		sep := slices.Index(fields, "-")
		if len(fields) < 5 || sep < 0 || sep+1 >= len(fields) {
			continue
		}
		f(unescapeMount(fields[4]), fields[sep+1])
	}
	return s.Err()
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// makeCgroups creates cg with children runtime and pods in every hierarchy.
// cgroup v1's cpuset needs its cpus and mems copied down before a process
// can join; cgroup v2 gets its controllers enabled for the children.
func makeCgroups(cg string) error {
	mounts, err := cgroupMounts()
	if err != nil {
		return err
	}
	for mp, v2 := range mounts {
		for _, sub := range []string{"", "runtime", "pods"} {
			dir := filepath.Join(mp, cg, sub)
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return err
			}
			if !v2 {
				if err := copyCpuset(dir); err != nil {
					return err
				}
			}
			if v2 && sub == "" {
				if ctrls, err := os.ReadFile(filepath.Join(dir, "cgroup.controllers")); err == nil && len(strings.Fields(string(ctrls))) > 0 {
					enable := "+" + strings.Join(strings.Fields(string(ctrls)), " +")
					if err := os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte(enable), 0o644); err != nil {
						return fmt.Errorf("enabling %s in %s: %w", enable, dir, err)
					}
				}
			}
		}
	}
	return nil
}

// copyCpuset gives a new cgroup v1 cpuset its parent's cpus and mems;
// elsewhere (no cpuset.cpus in the parent) it does nothing.
func copyCpuset(dir string) error {
	for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
		parent, err := os.ReadFile(filepath.Join(filepath.Dir(dir), f))
		if err != nil {
			return nil //nolint:nilerr // not the cpuset hierarchy
		}
		if err := os.WriteFile(filepath.Join(dir, f), parent, 0o644); err != nil {
			return fmt.Errorf("%s: %w", filepath.Join(dir, f), err)
		}
	}
	return nil
}

// joinCgroup moves a process into cg in every hierarchy.
func joinCgroup(pid int, cg string) error {
	mounts, err := cgroupMounts()
	if err != nil {
		return err
	}
	for mp := range mounts {
		if err := os.WriteFile(filepath.Join(mp, cg, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644); err != nil {
			return fmt.Errorf("moving pid %d into %s: %w", pid, filepath.Join(mp, cg), err)
		}
	}
	return nil
}

// cgroupPIDs are the processes in cg and below, in every hierarchy.
func cgroupPIDs(cg string) ([]int, error) {
	mounts, err := cgroupMounts()
	if err != nil {
		return nil, err
	}
	seen := map[int]bool{}
	for mp := range mounts {
		root := filepath.Join(mp, cg)
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					return nil
				}
				return err
			}
			if d.IsDir() {
				return nil
			}
			if d.Name() != "cgroup.procs" {
				return nil
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return nil // removed meanwhile
			}
			for _, f := range strings.Fields(string(b)) {
				if pid, err := strconv.Atoi(f); err == nil {
					seen[pid] = true
				}
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	out := make([]int, 0, len(seen))
	for pid := range seen {
		out = append(out, pid)
	}
	slices.Sort(out)
	return out, nil
}

// killCgroup SIGKILLs every process in cg until none is left.
func killCgroup(cg string) error {
	deadline := time.Now().Add(15 * time.Second)
	for {
		pids, err := cgroupPIDs(cg)
		if err != nil {
			return err
		}
		if len(pids) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("processes %v of cgroup %s did not exit after SIGKILL", pids, cg)
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// removeCgroups removes cg and everything below it in every hierarchy,
// deepest first; a cgroup whose last process is still exiting is retried.
func removeCgroups(cg string) error {
	mounts, err := cgroupMounts()
	if err != nil {
		return err
	}
	var errs []error
	for mp := range mounts {
		var dirs []string
		_ = filepath.WalkDir(filepath.Join(mp, cg), func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		slices.Reverse(dirs)
		for _, d := range dirs {
			var err error
			for range 50 {
				if err = syscall.Rmdir(d); err == nil || errors.Is(err, syscall.ENOENT) {
					err = nil
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("removing cgroup %s: %w", d, err))
			}
		}
	}
	return errors.Join(errs...)
}

// unmountUnder detaches every mount at or below dir, deepest first (a
// kubelet bind-mounts its root directory onto itself; containerd mounts
// snapshots, network namespaces and shm under its own).
func unmountUnder(dir string) error {
	for pass := 0; ; pass++ {
		var mps []string
		if err := eachMount(func(mp, _ string) {
			if mp == dir || strings.HasPrefix(mp, dir+"/") {
				mps = append(mps, mp)
			}
		}); err != nil {
			return err
		}
		if len(mps) == 0 {
			return nil
		}
		if pass == 5 {
			return fmt.Errorf("still mounted after 5 passes: %s", strings.Join(mps, ", "))
		}
		slices.SortFunc(mps, func(a, b string) int { return len(b) - len(a) })
		for _, mp := range mps {
			_ = syscall.Unmount(mp, syscall.MNT_DETACH)
		}
	}
}
