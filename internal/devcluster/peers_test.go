package devcluster

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// While the peers' build runs, a controller not yet built at its version is
// waited for; once it is, or when no build runs, the wait ends at once.
func TestWaitBuilt(t *testing.T) {
	root := t.TempDir()
	bin := filepath.Join(root, "bin")
	if err := os.MkdirAll(filepath.Join(bin, ".versions"), 0o755); err != nil {
		t.Fatal(err)
	}
	c := Controller{Name: "jobset"}
	ctx := context.Background()
	if err := waitBuilt(ctx, c, root, "v1"); err != nil {
		t.Fatalf("no build running: want no wait, got %v", err)
	}
	build := exec.Command("sleep", "30")
	if err := build.Start(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bin, ".peers-building"), []byte(strconv.Itoa(build.Process.Pid)), 0o644); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if err := waitBuilt(short, c, root, "v1"); err == nil {
		t.Fatal("a build is running and the controller is not built: want a wait until the deadline")
	}
	go func() {
		time.Sleep(200 * time.Millisecond)
		_ = os.WriteFile(filepath.Join(bin, ".versions", "jobset-controller"), []byte("v1\n"), 0o644)
	}()
	start := time.Now()
	if err := waitBuilt(ctx, c, root, "v1"); err != nil {
		t.Fatal(err)
	}
	if time.Since(start) > 10*time.Second {
		t.Error("the wait did not end when the controller was built")
	}
	// A build that ended (failed, say) leaves nothing to wait for: the
	// start then finds the binary missing and says so.
	_ = build.Process.Kill()
	_ = build.Wait()
	if err := waitBuilt(ctx, Controller{Name: "kueue"}, root, "v2"); err != nil {
		t.Fatalf("the build ended: want no wait, got %v", err)
	}
}
