package main

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
)

// The fleet estimate's assumptions about Prometheus's memory, each with its
// source. Robust Perception, "How much RAM does Prometheus 2.x need for
// cardinality and ingestion?" (2019, profiling Prometheus 2.9): about 732
// bytes per series, 32 per label pair and the metric name twice, all of it
// doubled for Go's garbage collection; for ingestion the samples of up to
// 3 hours are held in the head, in chunks with 50% overhead, doubled again.
// Prometheus's storage documentation: 1 to 2 bytes per float sample (the
// upper bound taken). A native histogram's sample is larger: in
// prometheus/prometheus#12054 (2023), 93% of request-duration histogram
// samples took under 25 bytes (the bound taken).
const (
	promBytesPerSeries       = 732
	promBytesPerLabelPair    = 32
	promGCFactor             = 2
	promChunkOverhead        = 1.5
	promHeadWindow           = 3 * time.Hour
	promBytesPerFloatSample  = 2
	promBytesPerNativeSample = 25
	// Prometheus adds job and instance to every series it scrapes.
	promTargetLabels = 2
)

// exposition is what one scrape of an exporter's /metrics holds.
type exposition struct {
	textBytes, gzipBytes, protoBytes, protoGzipBytes int
	// classic: the series of the text format (every sample line);
	// workload: those of them with a workload label.
	classic, workload int
	// labelPairs sums the label pairs of the classic series (le and
	// quantile included); nameBytes their names' lengths.
	labelPairs, nameBytes int
	// Histograms that carry native buckets: their count, their classic
	// series (buckets with +Inf, _sum, _count), and their populated native
	// buckets (with the zero bucket).
	native, nativeClassic, nativeBuckets  int
	nativeWorkload, nativeClassicWorkload int
}

// scrapeExposition reads url twice: as Prometheus's text format (what a
// scrape without native histograms ingests) and as protobuf (the only
// format that carries native histograms).
func scrapeExposition(url string) (exposition, error) {
	var e exposition
	get := func(accept string) ([]byte, error) {
		req, err := http.NewRequest(http.MethodGet, url, nil)
		if err != nil {
			return nil, err
		}
		req.Header.Set("Accept", accept)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("%s: HTTP %d", url, resp.StatusCode)
		}
		return io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	}
	text, err := get(string(expfmt.NewFormat(expfmt.TypeTextPlain)))
	if err != nil {
		return e, err
	}
	e.textBytes = len(text)
	e.gzipBytes = gzipped(text)
	for _, line := range strings.Split(string(text), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		e.classic++
		name, labels, _ := strings.Cut(line, "{")
		if i := strings.IndexByte(name, ' '); i >= 0 {
			name = name[:i]
		}
		e.nameBytes += len(name)
		if labels != "" {
			labels, _, _ = strings.Cut(labels, "}")
			e.labelPairs += strings.Count(labels, "=\"")
			if strings.Contains(labels, `workload="`) {
				e.workload++
			}
		}
	}
	proto, err := get(string(expfmt.NewFormat(expfmt.TypeProtoDelim)))
	if err != nil {
		return e, err
	}
	e.protoBytes, e.protoGzipBytes = len(proto), gzipped(proto)
	dec := expfmt.NewDecoder(bytes.NewReader(proto), expfmt.NewFormat(expfmt.TypeProtoDelim))
	for {
		var mf dto.MetricFamily
		if err := dec.Decode(&mf); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return e, err
		}
		for _, m := range mf.GetMetric() {
			h := m.GetHistogram()
			if h == nil || h.Schema == nil {
				continue
			}
			classic := len(h.GetBucket()) + 3
			if n := len(h.GetBucket()); n > 0 && math.IsInf(h.GetBucket()[n-1].GetUpperBound(), 1) {
				classic-- // the +Inf bucket already listed
			}
			buckets := 0
			for _, s := range append(h.GetPositiveSpan(), h.GetNegativeSpan()...) {
				buckets += int(s.GetLength())
			}
			if h.GetZeroCount() > 0 {
				buckets++
			}
			e.native++
			e.nativeClassic += classic
			e.nativeBuckets += buckets
			for _, l := range m.GetLabel() {
				if l.GetName() == "workload" {
					e.nativeWorkload++
					e.nativeClassicWorkload += classic
				}
			}
		}
	}
	return e, nil
}

// gzipped is the length of b compressed as Go's HTTP servers do for a
// scrape that accepts gzip (the default level).
func gzipped(b []byte) int {
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write(b)
	_ = zw.Close()
	return gz.Len()
}

// fleetModes are the three ways Prometheus may ingest the exposition.
type fleetMode struct {
	name           string
	series, native int // series per exporter, of them native histograms
	perWorkload    int // series of one workload
	// bytes, wire: one scrape's body, and as sent (gzipped), in the
	// format this mode scrapes (protobuf for native histograms).
	bytes, wire int
}

func (e exposition) modes() []fleetMode {
	return []fleetMode{
		{name: "classic buckets only (text format, or native histograms off)", series: e.classic, perWorkload: e.workload,
			bytes: e.textBytes, wire: e.gzipBytes},
		{name: "native histograms (scrape_native_histograms: true)", series: e.classic - e.nativeClassic + e.native, native: e.native,
			perWorkload: e.workload - e.nativeClassicWorkload + e.nativeWorkload, bytes: e.protoBytes, wire: e.protoGzipBytes},
		{name: "both (and always_scrape_classic_histograms: true)", series: e.classic + e.native, native: e.native,
			perWorkload: e.workload + e.nativeWorkload, bytes: e.protoBytes, wire: e.protoGzipBytes},
	}
}

// promMemory is the estimate of Prometheus's memory for series series of
// which native are native histograms, scraped every interval, with
// labelPairs and nameBytes the average per series.
func promMemory(series, native int, interval time.Duration, labelPairs, nameBytes float64) float64 {
	card := float64(series) * (promBytesPerSeries + promBytesPerLabelPair*(labelPairs+promTargetLabels) + 2*nameBytes) * promGCFactor
	samples := promHeadWindow.Seconds() / interval.Seconds()
	floats := float64(series-native) * samples * promBytesPerFloatSample
	natives := float64(native) * samples * promBytesPerNativeSample
	return card + (floats+natives)*promChunkOverhead*promGCFactor
}

// fleet reads one running exporter's /metrics and writes the estimate for
// -fleet.sidecars of them scraped every -fleet.interval.
func (o *scalingOptions) fleet() error {
	e, err := scrapeExposition(o.fleetURL)
	if err != nil {
		return err
	}
	n := float64(o.fleetSidecars)
	pairs := float64(e.labelPairs) / float64(max(e.classic, 1))
	names := float64(e.nameBytes) / float64(max(e.classic, 1))
	fmt.Printf("## fleet: %d exporters like %s, scraped every %s\n\n", o.fleetSidecars, o.fleetURL, o.fleetInterval)
	fmt.Printf("One scrape: %d bytes of text (%d gzipped, as Prometheus asks for it), %d bytes of protobuf (%d gzipped); %d series in the text format, %d of them with a workload label; %d histograms with native buckets (%d populated buckets in all), which are %d series in the text format; %.1f label pairs and %.0f name bytes per series on average.\n\n",
		e.textBytes, e.gzipBytes, e.protoBytes, e.protoGzipBytes, e.classic, e.workload, e.native, e.nativeBuckets, e.nativeClassic, pairs, names)
	fmt.Println("| ingested as | series per exporter | of one workload | fleet series | samples/s | scrape bytes per interval (gzipped / body) | Prometheus memory (estimate) |")
	fmt.Println("| --- | --- | --- | --- | --- | --- | --- |")
	for _, m := range e.modes() {
		mem := promMemory(m.series, m.native, o.fleetInterval, pairs, names) * n
		fmt.Printf("| %s | %d | %d | %.0f | %.0f | %.1f MB / %.1f MB | %.2f GiB |\n", m.name, m.series, m.perWorkload, float64(m.series)*n,
			float64(m.series)*n/o.fleetInterval.Seconds(), float64(m.wire)*n/1e6, float64(m.bytes)*n/1e6, mem/(1<<30))
	}
	fmt.Printf("\nMemory: (%d B + %d B per label pair, %d target labels added, + the name twice) × %d per series, plus %s of samples at %d B (float) or %d B (native histogram) × %.1f chunk overhead × %d.\n\n",
		promBytesPerSeries, promBytesPerLabelPair, promTargetLabels, promGCFactor, promHeadWindow, promBytesPerFloatSample, promBytesPerNativeSample, promChunkOverhead, promGCFactor)
	return nil
}
