package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"
)

// portsFor is how many server ports n concurrent connections need: one
// port's clients share the loopback's ephemeral range (about 28,000), so
// each port takes at most 20,000.
func portsFor(n int) int { return max(1, (n+19_999)/20_000) }

// runStreams starts the reference server and one client child that runs
// the plans in order, and returns what the child reported.
func runStreams(transport string, clientCores int, step time.Duration, spread bool, tokens int, ports int, plans []streamsPlan, stopAtFailure bool, profile string) ([]streamsResult, []int, []int, error) {
	cpus, err := allowedCPUs()
	if err != nil {
		return nil, nil, nil, err
	}
	raiseFileLimit()
	clientCPUs, serverCPUs, shared := splitCPUs(cpus, clientCores)
	srv, urls, err := startServer(serverCPUs, step, spread, ports)
	if err != nil {
		return nil, nil, nil, err
	}
	defer srv.stop()
	job := clientJob{
		Mode: modeStreams, URLs: urls, Cores: len(clientCPUs), ServerCores: len(serverCPUs), SharedCores: shared,
		Tokens: tokens, Workloads: ports, Observer: "series", Profile: profile,
		Plans: plans, StopAtFirstFailure: stopAtFailure, Transport: transport,
	}
	cl, err := startChild(roleClient, clientCPUs, job)
	if err != nil {
		return nil, nil, nil, err
	}
	defer cl.stop()
	var out []streamsResult
	for {
		var r streamsResult
		if err := cl.line(&r); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return out, clientCPUs, serverCPUs, err
		}
		if r.Err != "" {
			return out, clientCPUs, serverCPUs, errors.New(r.Err)
		}
		out = append(out, r)
		fmt.Fprintf(os.Stderr, "# %d streams: held %v (sent %d, dropped %d, failed %d)\n", r.Plan.Streams, r.Held, r.Sent, r.Dropped, r.Failed)
	}
	return out, clientCPUs, serverCPUs, nil
}

// perStream is b over n, in KB (1,000 bytes).
func perStream(b int64, n int64) string {
	if n <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f KB", float64(b)/float64(n)/1000)
}

// memory measures memory per in-flight stream: -memory.streams streams
// sent evenly over -memory.ramp, each -memory.tokens tokens a step apart,
// read when all are in flight and again just before the first ends.
func (o *scalingOptions) memory() error {
	for _, tr := range o.transports {
		if err := o.memoryOf(tr); err != nil {
			return err
		}
	}
	return nil
}

func (o *scalingOptions) memoryOf(transport string) error {
	length := time.Duration(o.memTokens) * o.memStep
	first := o.memRamp + 2*time.Second
	last := max(first, length-time.Second)
	p := streamsPlan{
		Streams: o.memStreams, Rate: float64(o.memStreams) / o.memRamp.Seconds(), Duration: o.memRamp,
		Probes: []time.Duration{first, last}, CountFrom: first, CountTo: last, CancelAt: last + 100*time.Millisecond,
		SatWindow: last - first, HeapProfile: true,
	}
	if last == first {
		p.Probes = p.Probes[:1]
		p.CountTo = first + time.Second
		p.CancelAt = p.CountTo + 100*time.Millisecond
	}
	profile := strings.TrimRight(o.profileDir, "/") + "/memory-" + fileSafe(transport)
	res, clientCPUs, serverCPUs, err := runStreams(transport, o.memCores, o.memStep, o.phase == "spread", o.memTokens, portsFor(o.memStreams), []streamsPlan{p}, false, profile)
	if err != nil {
		return err
	}
	if len(res) == 0 {
		return errors.New("the client reported nothing")
	}
	r := res[0]
	fmt.Printf("## memory, %s: %d streams of %d tokens, a token every %s (%s each, %s), sent over %s; client on %d cores (%s), server on %d (%s)\n\n",
		transport, o.memStreams, o.memTokens, o.memStep, length, o.phase, o.memRamp, len(clientCPUs), cpuList(clientCPUs), len(serverCPUs), cpuList(serverCPUs))
	fmt.Println("Each figure is the process's memory at that instant less what it held before the run, over the streams then in flight; the heap after a collection (live objects only), goroutine stacks in use, and the resident set.")
	fmt.Println()
	fmt.Println("| at | streams in flight | goroutines per stream | live heap per stream | stacks per stream | heap + stacks per stream | RSS per stream |")
	fmt.Println("| --- | --- | --- | --- | --- | --- | --- |")
	for _, m := range r.Probes {
		fmt.Printf("| %.0f s | %d | %.2f | %s | %s | %s | %s |\n", m.AtSeconds, m.InFlight, float64(m.Goroutines)/float64(max(m.InFlight, 1)),
			perStream(m.HeapObjects, m.InFlight), perStream(m.Stacks, m.InFlight), perStream(m.HeapObjects+m.Stacks, m.InFlight), perStream(m.RSS, m.InFlight))
	}
	fmt.Println()
	fmt.Printf("Sent %d, failed %d, dropped %d; schedule lag p50 / p99 %s / %s; scheduling latency p99 %s; %.0f chunks/s with the client at %.2f cores and the server at %.2f; heap profile %s-%d.heap.pprof.\n\n",
		r.Sent, r.Failed, r.Dropped, ms(time.Duration(r.LagP50*1e9)), ms(time.Duration(r.LagP99*1e9)), ms(time.Duration(r.SchedP99*1e9)),
		r.ChunksPerSecond, r.CPUCores, r.ServerCPUCores, profile, o.memStreams)
	return nil
}

// concurrency finds the most concurrent streams one process holds: at each
// level n, streams of -concurrency.tokens tokens a step apart are sent at
// n / (their length) per second, so that n are in flight once the first
// ends, and held so for -concurrency.hold. A level is held when nothing
// failed, at most 1% was dropped, and both the schedule lag p99 (every send) and the
// scheduling latency p99 over the hold are under 10 ms.
func (o *scalingOptions) concurrency() error {
	for _, tr := range o.transports {
		if err := o.concurrencyOf(tr); err != nil {
			return err
		}
	}
	return nil
}

func (o *scalingOptions) concurrencyOf(transport string) error {
	length := time.Duration(o.concTokens) * o.concStep
	levels := slices.Clone(o.concLevels)
	slices.Sort(levels)
	raiseFileLimit()
	// Every stream is a descriptor in the client (and one in the
	// server); a level the limit cannot hold is not run.
	limit := int(min(fileLimit(), 1<<30))
	var skipped []int
	for len(levels) > 0 && levels[len(levels)-1]+levels[len(levels)-1]/10+200 > limit {
		skipped = append([]int{levels[len(levels)-1]}, skipped...)
		levels = levels[:len(levels)-1]
	}
	if len(levels) == 0 {
		return fmt.Errorf("the open-file limit %d holds none of the levels %v", limit, skipped)
	}
	var plans []streamsPlan
	for _, n := range levels {
		end := length + o.concHold
		plans = append(plans, streamsPlan{
			Streams: n, Rate: float64(n) / length.Seconds(), Duration: end,
			Probes: []time.Duration{end - 500*time.Millisecond}, CountFrom: length, CountTo: end,
			CancelAt: end + 100*time.Millisecond, SatWindow: o.concHold,
		})
	}
	res, clientCPUs, serverCPUs, err := runStreams(transport, o.concCores, o.concStep, o.phase == "spread", o.concTokens, portsFor(levels[len(levels)-1]), plans, true, "")
	if err != nil && len(res) == 0 {
		return err
	}
	fmt.Printf("## concurrency, %s: streams of %d tokens, a token every %s (%s each, %s), sent at n / %s per second and held %s at n in flight; client on %d cores (%s), server on %d (%s)\n\n",
		transport, o.concTokens, o.concStep, length, o.phase, length, o.concHold, len(clientCPUs), cpuList(clientCPUs), len(serverCPUs), cpuList(serverCPUs))
	fmt.Println("| streams | req/s | sent / dropped / failed | in flight at the end | lag p50 / p99 | sched. latency p99 (hold) | degraded | chunks/s (hold) | client cores busy | server cores busy | server late | heap + stacks per stream | held |")
	fmt.Println("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
	most := 0
	for _, r := range res {
		var inFlight int64
		mem := "-"
		if len(r.Probes) > 0 {
			m := r.Probes[len(r.Probes)-1]
			inFlight, mem = m.InFlight, perStream(m.HeapObjects+m.Stacks, m.InFlight)
		}
		held := "no"
		if r.Held {
			held = "yes"
			most = max(most, r.Plan.Streams)
		}
		fmt.Printf("| %d | %.0f | %d / %d / %d | %d | %s / %s | %s | %v | %.0f | %.2f | %.2f | %.2f%% | %s | %s |\n", r.Plan.Streams, r.Plan.Rate,
			r.Sent, r.Dropped, r.Failed, inFlight,
			ms(time.Duration(r.LagP50*1e9)), ms(time.Duration(r.LagP99*1e9)), ms(time.Duration(r.SchedP99*1e9)), r.Degraded,
			r.ChunksPerSecond, r.CPUCores, r.ServerCPUCores, 100*r.ServerLate, mem, held)
	}
	fmt.Printf("\nMost concurrent streams held: %d (open-file limit %d).\n", most, fileLimitOf(res))
	if len(skipped) > 0 {
		fmt.Printf("Not run, over the open-file limit of %d: %v.\n", limit, skipped)
	}
	fmt.Println()
	if err != nil {
		return err
	}
	return nil
}

func fileLimitOf(res []streamsResult) uint64 {
	if len(res) == 0 {
		return 0
	}
	return res[0].FileLimit
}
