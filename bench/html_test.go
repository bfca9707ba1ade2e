package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"image"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/infer-exporter/infer_exporter/bench/render"
	"github.com/infer-exporter/infer_exporter/bench/report"
	"github.com/infer-exporter/infer_exporter/internal/realstack"
)

// headless runs chromium on a local file with no network: the flags turn off
// every background fetch, and the page itself references nothing.
func headless(t *testing.T, bin string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--force-device-scale-factor=1", "--hide-scrollbars", "--user-data-dir=" + t.TempDir()}
	cmd := exec.CommandContext(ctx, bin, append(base, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium %v: %v\n%s", args, err, stderr.String())
	}
	return stdout.Bytes()
}

// layoutProbe writes each chart's box and the page height into the DOM, for
// the test to find the charts in the screenshot. It goes into a copy of the
// report only: the report itself has no script.
const layoutProbe = `<pre id="layout"></pre><script>
document.getElementById("layout").textContent = JSON.stringify({
  height: document.documentElement.scrollHeight,
  charts: Array.from(document.querySelectorAll("svg.chart")).map(function (e) {
    var r = e.getBoundingClientRect();
    return {x: r.left + window.scrollX, y: r.top + window.scrollY, w: r.width, h: r.height,
            heatmap: e.classList.contains("heatmap"), cell: e.classList.contains("cdf") || e.classList.contains("timeline"),
            title: e.getAttribute("aria-label")};
  }),
  cell: (function () {
    var e = document.querySelector("#cells h3");
    return e ? e.getBoundingClientRect().top + window.scrollY : -1;
  })()
});
</script>`

type chartBox struct {
	X, Y, W, H    float64
	Heatmap, Cell bool
	Title         string
}

// updateScreenshots rewrites the report's screenshot in docs/images/ from
// TestHTMLRendersInChromium: go test -run HTMLRendersInChromium ./bench/ -update-screenshots.
var updateScreenshots = flag.Bool("update-screenshots", false, "write the HTML report's screenshot into docs/images/")

// screenshotFile is the screenshot of a cell's table and charts in the docs.
const screenshotFile = "bench-report-cell.png"

// TestHTMLRendersInChromium renders a real report in headless Chromium,
// offline, and checks that the leaderboard rows are there and that every
// chart drew: its SVG holds marks, and its box in the screenshot holds the
// series' colours (the heatmap: its colour scale's).
func TestHTMLRendersInChromium(t *testing.T) {
	t.Parallel() // mostly waits on real time: beside the package's other such tests
	bin := realstack.Chromium(t)
	gpus := newFakeGPUs()
	gpus.set("0", 90e9, 55, 350)
	gpus.set("1", 30e9, 45, 120)
	rep := runSmall(t, gpus, true)
	dir := t.TempDir()
	if err := WriteFiles(dir, rep); err != nil {
		t.Fatal(err)
	}
	html, err := os.ReadFile(filepath.Join(dir, HTMLFile))
	if err != nil {
		t.Fatal(err)
	}
	probe := filepath.Join(dir, "probe.html")
	if err := os.WriteFile(probe, bytes.Replace(html, []byte("</body>"), []byte(layoutProbe+"</body>"), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	dom := string(headless(t, bin, "--window-size=1280,2000", "--dump-dom", "file://"+probe))

	if n := strings.Count(dom, `class="leaderboard-row`); n != len(rep.Ranking.Entries) || n != 2 {
		t.Errorf("leaderboard rows in the DOM: %d, want %d", n, len(rep.Ranking.Entries))
	}
	svgs := regexp.MustCompile(`(?s)<svg class="chart[^"]*".*?</svg>`).FindAllString(dom, -1)
	if len(svgs) < 10 {
		t.Fatalf("%d charts in the DOM", len(svgs))
	}
	for _, s := range svgs {
		if !strings.Contains(s, "<circle") && !strings.Contains(s, "<polyline") && strings.Count(s, "<rect") < 20 {
			t.Errorf("an empty chart: %.200s", s)
		}
	}
	m := regexp.MustCompile(`(?s)<pre id="layout">(.*?)</pre>`).FindStringSubmatch(dom)
	if m == nil {
		t.Fatal("the layout probe did not run")
	}
	var layout struct {
		Height float64
		Charts []chartBox
		Cell   float64
	}
	if err := json.Unmarshal([]byte(strings.ReplaceAll(m[1], "&quot;", `"`)), &layout); err != nil {
		t.Fatalf("layout %q: %v", m[1], err)
	}
	if len(layout.Charts) != len(svgs) {
		t.Errorf("%d chart boxes, %d charts", len(layout.Charts), len(svgs))
	}
	// Every cell has its CDFs and its windows: three of each, none empty,
	// and no figure anywhere reads NaN or Inf.
	if n := strings.Count(dom, `class="chart cdf"`); n != 3*len(rep.Cells) {
		t.Errorf("%d CDF charts for %d cells, want 3 each", n, len(rep.Cells))
	}
	if n := strings.Count(dom, `class="chart timeline"`); n != 3*len(rep.Cells) {
		t.Errorf("%d timeline charts for %d cells, want 3 each", n, len(rep.Cells))
	}
	for _, s := range svgs {
		if strings.Contains(s, "no data") && (strings.Contains(s, "(CDF)") || strings.Contains(s, "by window")) {
			t.Errorf("an empty cell chart: %.200s", s)
		}
	}
	if m := regexp.MustCompile(`.{0,80}\b(NaN|[+-]?Inf)\b.{0,80}`).FindString(dom); m != "" {
		t.Errorf("the page shows NaN or Inf: %q", m)
	}

	height := int(min(layout.Height+10, 16000))
	shot := filepath.Join(dir, "shot.png")
	headless(t, bin, "--window-size=1280,"+itoa(height), "--screenshot="+shot, "file://"+probe)
	f, err := os.Open(shot)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	if nonWhite(img, img.Bounds()) < 10000 {
		t.Fatal("the screenshot is blank")
	}
	drawn := 0
	for _, c := range layout.Charts {
		// The plot area only: the title and the legend's swatches are above
		// render.PadTop, the axes' labels beside and below it.
		box := image.Rect(int(c.X)+render.PadLeft, int(c.Y)+render.PadTop, int(c.X+c.W)-render.PadRight, int(c.Y+c.H)-render.PadBottom).Intersect(img.Bounds())
		if box.Dy() < int(c.H)-render.PadTop-render.PadBottom-1 {
			t.Errorf("chart %q (y %v) is outside the %d px screenshot", c.Title, c.Y, height)
			continue
		}
		if n := colored(img, box); n < 30 {
			t.Errorf("chart %q: %d coloured pixels: it did not draw", c.Title, n)
		}
		drawn++
	}
	if drawn < 10 {
		t.Errorf("only %d charts checked", drawn)
	}
	var heatmaps int
	for _, c := range layout.Charts {
		if c.Heatmap {
			heatmaps++
		}
	}
	if heatmaps != 1 {
		t.Errorf("%d heatmaps, want 1", heatmaps)
	}
	// The docs' screenshot: the golden report's first cell (two
	// repeats of synthetic requests, so the same picture every time).
	cropFirstCell(t, bin, goldenReport(t))
}

// cropFirstCell renders r in Chromium and crops the screenshot to its first
// cell: heading, table and charts; with -update-screenshots it writes the
// crop into docs/images/.
func cropFirstCell(t *testing.T, bin string, r *report.Report) {
	t.Helper()
	var html bytes.Buffer
	if err := render.WriteHTML(&html, r); err != nil {
		t.Fatal(err)
	}
	probe := filepath.Join(t.TempDir(), "cell.html")
	if err := os.WriteFile(probe, bytes.Replace(html.Bytes(), []byte("</body>"), []byte(layoutProbe+"</body>"), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	dom := string(headless(t, bin, "--window-size=1280,2000", "--dump-dom", "file://"+probe))
	m := regexp.MustCompile(`(?s)<pre id="layout">(.*?)</pre>`).FindStringSubmatch(dom)
	if m == nil {
		t.Fatal("the layout probe did not run")
	}
	var layout struct {
		Height float64
		Charts []chartBox
		Cell   float64
	}
	if err := json.Unmarshal([]byte(strings.ReplaceAll(m[1], "&quot;", `"`)), &layout); err != nil {
		t.Fatalf("layout %q: %v", m[1], err)
	}
	var last float64
	n := 0
	for _, c := range layout.Charts {
		if c.Cell && n < 6 {
			last = max(last, c.Y+c.H)
			n++
		}
	}
	if layout.Cell < 0 || n < 6 {
		t.Fatalf("the first cell (at %v) has %d charts", layout.Cell, n)
	}
	shot := filepath.Join(filepath.Dir(probe), "cell.png")
	headless(t, bin, "--window-size=1280,"+itoa(int(min(layout.Height+10, 16000))), "--screenshot="+shot, "file://"+probe)
	f, err := os.Open(shot)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	crop := image.Rect(0, int(layout.Cell)-12, 1280, int(last)+12).Intersect(img.Bounds())
	if crop.Dy() < 400 || nonWhite(img, crop) < 5000 {
		t.Fatalf("the first cell's crop %v is blank or cut", crop)
	}
	if !*updateScreenshots {
		return
	}
	sub, ok := img.(interface {
		SubImage(image.Rectangle) image.Image
	})
	if !ok {
		t.Fatalf("%T cannot be cropped", img)
	}
	var b bytes.Buffer
	if err := png.Encode(&b, sub.SubImage(crop)); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join("..", "docs", "images", screenshotFile), b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// nonWhite counts pixels that are not white in r.
func nonWhite(img image.Image, r image.Rectangle) int {
	n := 0
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			cr, cg, cb, _ := img.At(x, y).RGBA()
			if cr < 0xf000 || cg < 0xf000 || cb < 0xf000 {
				n++
			}
		}
	}
	return n
}

// colored counts saturated pixels in r: the series' palette colours and
// the heatmap's, not the greys of text, grid and frame.
func colored(img image.Image, r image.Rectangle) int {
	n := 0
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			cr, cg, cb, _ := img.At(x, y).RGBA()
			hi, lo := max(cr, cg, cb)>>8, min(cr, cg, cb)>>8
			if hi-lo > 60 {
				n++
			}
		}
	}
	return n
}

// runSmall runs a short bench of two simulators with every section the
// report has: open and closed loop, a replay, a sweep, known answers, and
// GPU samples from gpus (a fake or the real NVML collector).
func runSmall(t *testing.T, gpus GPUReader, wantMemory bool) *report.Report {
	t.Helper()
	fast := startSim(t, 10*time.Millisecond, 0.5, 0)
	slow := startSim(t, 20*time.Millisecond, 0.5, 0)
	dir := t.TempDir()
	writeTestFile(t, dir, "trace.csv", azureTrace(20, 50*time.Millisecond))
	yml := targetsYAML([]string{"fast", "slow"}, []*simTarget{fast, slow}) + `
bench:
  seed: 1
  matrix:
    process: constant
    rates: [5, 10]
    concurrencies: [1, 2]
    shapes: [{input_tokens: 24, output_tokens: 8}]
    replays: [{name: azure, source: azure, path: trace.csv}]
  warmup: 100ms
  duration: 500ms
  repeats: 1
  prompt_set_size: 16
  stability: {enabled: false}
  sampling: {ignore_eos: true}
  slo: {e2e: 200ms}
  sweep: {start: 10, factor: 4, max_rate: 40, refine: 0, duration: 400ms, warmup: 0s}
  ranking: {resamples: 200}
  gpu_sample_interval: 50ms
  known_answers: [{prompt: "hi", expect: '\w'}]
`
	cfg, err := Parse([]byte(yml), filepath.Join(dir, "b.yml"))
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Run(context.Background(), cfg, Options{GPUs: gpus})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.GPU.Available || len(rep.Sweeps) != 2 || len(rep.Cells) != 10 {
		t.Fatalf("gpu %v, %d sweeps, %d cells", rep.GPU.Available, len(rep.Sweeps), len(rep.Cells))
	}
	if wantMemory != strings.Contains(strings.Join(rep.Ranking.Components, ","), "memory") {
		t.Errorf("memory not scored with GPU samples: %v", rep.Ranking.Components)
	}
	return rep
}

// azureTrace is a synthetic trace in the Azure format: n requests gap
// apart, with short prompts and outputs.
func azureTrace(n int, gap time.Duration) string {
	var b strings.Builder
	b.WriteString("TIMESTAMP,ContextTokens,GeneratedTokens\n")
	t0 := time.Date(2023, 11, 16, 18, 31, 22, 0, time.UTC)
	for i := 0; i < n; i++ {
		b.WriteString(t0.Add(time.Duration(i) * gap).Format("2006-01-02 15:04:05.0000000"))
		b.WriteString("," + itoa(20+i%7) + "," + itoa(3+i%4) + "\n")
	}
	return b.String()
}
