package report

import (
	"fmt"
	"html"
	"math"
	"strings"
	"time"
)

// chart is a line chart drawn as inline SVG (no script, no network).
type chart struct {
	title, xLabel, yLabel string
	series                []line
	// xMax and yMax bound the axes (0: from the data).
	xMax, yMax float64
	// xTime: x is seconds, labelled as durations.
	xTime bool
}

type line struct {
	name, color string
	pts         []point
}

type point struct{ x, y float64 }

// colors of the schedulers, in Models order, then others.
// palette colours the models by name (simulate.Lockstep, PodByPod,
// InTreeGang).
var palette = map[string]string{"lockstep": "#1b7f5f", "pod-by-pod": "#d0551b", "in-tree-gang": "#6a5fb0"}

func colorOf(name string, i int) string {
	if c, ok := palette[name]; ok {
		return c
	}
	return []string{"#444", "#c2185b", "#0277bd"}[i%3]
}

const (
	chartW, chartH                   = 760, 250
	marginL, marginR, marginT, margB = 64, 16, 30, 42
)

func (c chart) svg() string {
	xMax, yMax := c.xMax, c.yMax
	for _, s := range c.series {
		for _, p := range s.pts {
			xMax, yMax = math.Max(xMax, p.x), math.Max(yMax, p.y)
		}
	}
	if xMax <= 0 {
		xMax = 1
	}
	if yMax <= 0 {
		yMax = 1
	}
	yTicks := niceTicks(yMax)
	yMax = yTicks[len(yTicks)-1]
	pw, ph := float64(chartW-marginL-marginR), float64(chartH-marginT-margB)
	px := func(x float64) float64 { return marginL + x/xMax*pw }
	py := func(y float64) float64 { return marginT + ph - y/yMax*ph }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" role="img" aria-label="%s">`, chartW, chartH, chartW, chartH, html.EscapeString(c.title))
	fmt.Fprintf(&b, `<text x="%d" y="18" class="t">%s</text>`, marginL, html.EscapeString(c.title))
	for _, t := range yTicks {
		y := py(t)
		fmt.Fprintf(&b, `<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" class="g"/><text x="%d" y="%.1f" class="yl">%s</text>`,
			marginL, chartW-marginR, y, y, marginL-6, y+4, trimFloat(t))
	}
	for _, t := range niceTicks(xMax) {
		if t > xMax {
			break
		}
		x := px(t)
		label := trimFloat(t)
		if c.xTime {
			label = shortDur(t)
		}
		fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%d" y2="%d" class="g"/><text x="%.1f" y="%d" class="xl">%s</text>`,
			x, x, marginT, chartH-margB, x, chartH-margB+16, label)
	}
	fmt.Fprintf(&b, `<text x="%d" y="%d" class="xl">%s</text>`, marginL+int(pw/2), chartH-6, html.EscapeString(c.xLabel))
	fmt.Fprintf(&b, `<text x="14" y="%d" class="yl" transform="rotate(-90 14 %d)">%s</text>`, marginT+int(ph/2), marginT+int(ph/2), html.EscapeString(c.yLabel))
	for _, s := range c.series {
		var pts []string
		for _, p := range s.pts {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", px(p.x), py(p.y)))
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>`, s.color, strings.Join(pts, " "))
	}
	lx := float64(chartW - marginR - 10)
	for i := len(c.series) - 1; i >= 0; i-- {
		s := c.series[i]
		w := float64(len(s.name))*7 + 24
		lx -= w
		fmt.Fprintf(&b, `<rect x="%.0f" y="8" width="14" height="4" fill="%s"/><text x="%.0f" y="14" class="lg">%s</text>`, lx, s.color, lx+18, html.EscapeString(s.name))
	}
	b.WriteString(`</svg>`)
	return b.String()
}

// niceTicks are 0 and 4–6 round steps up to at least max.
func niceTicks(max float64) []float64 {
	raw := max / 5
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := mag
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*mag >= raw {
			step = m * mag
			break
		}
	}
	var out []float64
	for v := 0.0; ; v += step {
		out = append(out, v)
		if v >= max {
			break
		}
	}
	return out
}

func trimFloat(v float64) string {
	if v == math.Trunc(v) {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.2g", v)
}

// shortDur labels seconds on a time axis: "90s", "45m", "36h".
func shortDur(sec float64) string {
	d := time.Duration(sec * float64(time.Second))
	switch {
	case d >= 2*time.Hour:
		return trimFloat(math.Round(d.Hours()*10)/10) + "h"
	case d >= 2*time.Minute:
		return trimFloat(math.Round(d.Minutes()*10)/10) + "m"
	}
	return trimFloat(math.Round(d.Seconds()*10)/10) + "s"
}

// maxPoints bounds a plotted series: longer runs are averaged per bucket
// of time.
const maxPoints = 600

// steps turns samples into a plotted step function of value over
// [0, horizon]: exact steps for a short run, time-weighted bucket means
// for a long one.
func steps(samples []Sample, horizon time.Duration, value func(Sample) float64) []point {
	h := horizon.Seconds()
	if len(samples) <= maxPoints/2 {
		pts := []point{{0, 0}}
		prev := 0.0
		for _, s := range samples {
			if s.At > horizon {
				break
			}
			x := s.At.Seconds()
			v := value(s)
			pts = append(pts, point{x, prev}, point{x, v})
			prev = v
		}
		return append(pts, point{h, prev})
	}
	bucket := h / maxPoints
	sums := make([]float64, maxPoints)
	ForSteps(samples, horizon, func(s Sample, dt float64) {
		v := value(s)
		from := s.At.Seconds()
		for dt > 0 {
			i := min(int(from/bucket), maxPoints-1)
			end := math.Min(float64(i+1)*bucket, from+dt)
			if i == maxPoints-1 {
				end = from + dt
			}
			sums[i] += v * (end - from)
			dt -= end - from
			from = end
		}
	})
	pts := make([]point, maxPoints)
	for i := range sums {
		pts[i] = point{(float64(i) + 0.5) * bucket, sums[i] / bucket}
	}
	return pts
}

// cdf is the empirical distribution of values (seconds), as steps.
func cdf(values []float64) []point {
	if len(values) == 0 {
		return nil
	}
	s := append([]float64(nil), values...)
	sortFloats(s)
	n := float64(len(s))
	pts := []point{{0, 0}}
	stride := max(1, len(s)/maxPoints)
	for i := 0; i < len(s); i += stride {
		pts = append(pts, point{s[i], float64(i) / n}, point{s[i], float64(i+1) / n})
	}
	return append(pts, point{s[len(s)-1], 1})
}
