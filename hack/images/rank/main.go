// Command rank stands in for one rank of a training job on a real node. It
// prints the devices its container was given (the GPU_DEVICE_* variables and
// the files under /run/lockstep/devices that the simulated-GPU DRA driver
// injects through CDI) and what the downward API shows it, then runs until it
// is stopped (exit 143, --exit-code-on-signal), its --run time ends (exit
// with --exit-code) or it is asked over
// HTTP to exit: GET /exit?code=N on --listen ends the process with code N, as
// a crashing rank would; GET /devices answers the devices line.
//
// Its first line is the one `make demo` and the real-node tests read:
//
//	rank train-0-abcde saw devices gpu-0,gpu-1
package main

import (
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

const devicesDir = "/run/lockstep/devices"

func main() {
	run := flag.Duration("run", 0, "how long to run before exiting with --exit-code; 0 runs until stopped")
	exitCode := flag.Int("exit-code", 0, "exit code when --run ends")
	// A training process stopped before it finished fails: Python dies of the
	// signal (143), torchrun's agent exits 1. Exiting 0 instead would make a
	// Job count the stopped rank's index as completed.
	signalCode := flag.Int("exit-code-on-signal", 143, "exit code when stopped by SIGTERM or SIGINT")
	listen := flag.String("listen", ":8080", "address of the /exit and /devices endpoints; empty serves nothing")
	podinfo := flag.String("podinfo", "/etc/lockstep", "directory of downward-API files to print (missing: none)")
	flag.Parse()

	line := fmt.Sprintf("rank %s saw devices %s", os.Getenv("POD_NAME"), strings.Join(devices(), ","))
	fmt.Println(line)
	printPodinfo(*podinfo)

	exit := make(chan int, 1)
	if *listen != "" {
		mux := http.NewServeMux()
		mux.HandleFunc("/devices", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, line) })
		mux.HandleFunc("/exit", func(w http.ResponseWriter, r *http.Request) {
			code, err := strconv.Atoi(r.URL.Query().Get("code"))
			if err != nil {
				http.Error(w, "want /exit?code=N", http.StatusBadRequest)
				return
			}
			fmt.Fprintf(w, "exiting with %d\n", code)
			exit <- code
		})
		srv := &http.Server{Addr: *listen, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
		go func() {
			if err := srv.ListenAndServe(); err != nil && err != http.ErrServerClosed {
				fmt.Fprintln(os.Stderr, "serving:", err)
			}
		}()
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	var timeout <-chan time.Time
	if *run > 0 {
		timeout = time.After(*run)
	}
	select {
	case s := <-stop:
		fmt.Printf("rank %s stopped by %s; exiting with %d\n", os.Getenv("POD_NAME"), s, *signalCode)
		os.Exit(*signalCode)
	case <-timeout:
		fmt.Printf("rank %s ran %s; exiting with %d\n", os.Getenv("POD_NAME"), *run, *exitCode)
		os.Exit(*exitCode)
	case code := <-exit:
		time.Sleep(200 * time.Millisecond) // let the HTTP answer leave before the process does
		fmt.Printf("rank %s asked to exit with %d\n", os.Getenv("POD_NAME"), code)
		os.Exit(code)
	}
}

// devices are the device names the container was given: the values of its
// GPU_DEVICE_* variables and the files the driver mounted, each once, sorted.
func devices() []string {
	seen := map[string]bool{}
	for _, kv := range os.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "GPU_DEVICE_") {
			seen[v] = true
		}
	}
	if entries, err := os.ReadDir(devicesDir); err == nil {
		for _, e := range entries {
			seen[e.Name()] = true
		}
	}
	out := make([]string, 0, len(seen))
	for d := range seen {
		out = append(out, d)
	}
	sort.Strings(out)
	if len(out) == 0 {
		return []string{"none"}
	}
	return out
}

// printPodinfo prints each downward-API file of dir, one line each.
func printPodinfo(dir string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		if e.IsDir() || strings.HasPrefix(e.Name(), "..") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			continue
		}
		fmt.Printf("podinfo %s=%s\n", e.Name(), strings.TrimSpace(string(b)))
	}
}
