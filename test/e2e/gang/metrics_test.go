package gang

import (
	"bufio"
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/lockstep-dev/lockstep/test/e2e/harness"
)

// scrape reads the scheduler's /metrics into "name{labels}" → value, in the
// text exposition format (labels sorted by name, as the client writes them).
func scrape(t *testing.T, ctx context.Context, h *harness.Harness) map[string]float64 {
	t.Helper()
	return scrapeURL(t, ctx, h.Cluster.SchedulerMetricsURL())
}

// scrapeURL reads the /metrics at url, as scrape does.
func scrapeURL(t *testing.T, ctx context.Context, url string) map[string]float64 {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("scraping %s: %v", url, err)
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") || line == "" {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		out[line[:i]] = v
	}
	return out
}
