package simcases

import (
	"bytes"
	"fmt"
	"html"
	"time"

	"github.com/retrybudget/retrybudget/internal/sim"
)

// SVG plots attempts per second over time, one line per result, with the
// outage shaded. It is written by hand: a few dozen lines of SVG are smaller
// and clearer than a plotting library and its dependencies.
func SVG(names []string, results []sim.Result) []byte {
	const w, h, left, right, top, bottom = 1000, 420, 60, 300, 30, 40
	colors := []string{"#d62728", "#1f77b4", "#2ca02c", "#9467bd", "#ff7f0e"}
	var b bytes.Buffer
	if len(results) == 0 {
		return b.Bytes()
	}
	c := results[0].Config
	secs := int((c.Healthy + c.Outage + c.Recovery) / time.Second)
	peak := 1
	for _, r := range results {
		for i := 0; i < secs && i < len(r.Seconds); i++ {
			peak = max(peak, r.Seconds[i].Attempts)
		}
	}
	x := func(s float64) float64 { return left + s*float64(w-left-right)/float64(secs) }
	y := func(v float64) float64 { return float64(h-bottom) - v*float64(h-top-bottom)/float64(peak) }
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", w, h)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", w, h)
	o0, o1 := c.Healthy.Seconds(), (c.Healthy + c.Outage).Seconds()
	fmt.Fprintf(&b, `<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="#eeeeee"/>`+"\n", x(o0), top, x(o1)-x(o0), h-top-bottom)
	fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle" fill="#666">outage (%.0f%% errors)</text>`+"\n", (x(o0)+x(o1))/2, top-8, 100*c.ErrorRate)
	// Axes, with ticks every 10s and five on the load.
	fmt.Fprintf(&b, `<path d="M%d %d V%d H%d" stroke="black" fill="none"/>`+"\n", left, top, h-bottom, w-right)
	for s := 0; s <= secs; s += 10 {
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%ds</text>`+"\n", x(float64(s)), h-bottom+16, s)
	}
	for i := 0; i <= 5; i++ {
		v := float64(peak) * float64(i) / 5
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end">%.0f</text>`+"\n", left-6, y(v)+4, v)
	}
	fmt.Fprintf(&b, `<text x="14" y="%d" transform="rotate(-90 14 %d)" text-anchor="middle">attempts per second at the dependency</text>`+"\n", h/2, h/2)
	for i, r := range results {
		col := colors[i%len(colors)]
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="1.5" points="`, col)
		for s := 0; s < secs && s < len(r.Seconds); s++ {
			fmt.Fprintf(&b, "%.1f,%.1f ", x(float64(s)+0.5), y(float64(r.Seconds[s].Attempts)))
		}
		b.WriteString(`"/>` + "\n")
		name := fmt.Sprintf("result %d", i)
		if i < len(names) {
			name = names[i]
		}
		ly := top + 20 + 22*i
		fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="3"/>`+"\n", w-right+15, ly, w-right+35, ly, col)
		fmt.Fprintf(&b, `<text x="%d" y="%d">%s (%.2fx)</text>`+"\n", w-right+40, ly+4, html.EscapeString(name), r.Amplification)
	}
	b.WriteString("</svg>\n")
	return b.Bytes()
}
