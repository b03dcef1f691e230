package main

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// renderReport writes the markdown tables.
func renderReport(res *Results) string {
	var w strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&w, format, args...) }
	renderIntro(p, res)
	renderAge(p, res)
	renderLatency(p, res)
	renderThroughput(p, res)
	renderSerial(p, res)
	renderStreaming(p, res)
	renderRSS(p, res)
	renderPeak(p, res)
	renderTargets(p, res)
	renderLedgerMicro(p, res)
	renderErrors(p, res)
	return w.String()
}

// renderIntro says what the targets are and how to read the tables.
func renderIntro(p func(string, ...any), res *Results) {
	s := res.Settings
	p("## Load (loadgen, %s)\n\n", res.Started.Format(time.RFC3339))
	p("Targets: **direct** = the simulated provider (`relay sim -latency %s`), **proxy** = a bare "+
		"`httputil.ReverseProxy` in front of it (the floor), **gateway** = ModelRelay in front of it. "+
		"Every value is the median over %d round(s); the targets' order changes every round (a Williams design: each runs right after each other equally often). "+
		"Overhead = hop − direct at the same percentile; **gw/proxy** = gateway overhead ÷ proxy overhead.\n\n",
		s.SimLatency, s.Rounds)
	if s.Accounts > 1 {
		p("Each gateway's calls are spread over **%d accounts**, one key each, taken in turn.\n\n", s.Accounts)
	}
	if hasPG(res) {
		p("**gateway-pg** is a second ModelRelay, configured as **gateway** but with its ledger in PostgreSQL (database `%s` on a server "+
			"of the same machine, reached through its unix socket, synchronous_commit **%s**) instead of embedded Badger; **pg/proxy** = its "+
			"overhead ÷ the proxy's, **pg − gw** = its overhead minus the Badger gateway's. The PostgreSQL server is not pinned: its processes "+
			"run on whichever CPU it may use (the header says which), while Badger's work is inside the gateway's process.\n\n", s.PGDB, s.PGSync)
	}
	if hasX(res) {
		p("**gateway-x** is a third ModelRelay, configured as **gateway** (Badger, the same plugins, limits, route, model and prices) but with its " +
			"line speaking Gemini (`protocol: gemini`): every chat call is translated to `generateContent` (`streamGenerateContent?alt=sse` when " +
			"streamed), which the same provider answers, and the answer translated back to chat, billed from Gemini's usage. **x/proxy** = its " +
			"overhead ÷ the proxy's, **x − gw** = its overhead minus the pass-through gateway's: what translation adds.\n\n")
	}
	if hasControl(res) {
		p("**control** is a second bare proxy, the same program as **proxy** in front of the same provider, measured the same way: " +
			"the A/A test. **control/proxy** would be 1.00× on a quiet machine; how far it is from 1.00× is a lower bound on how far this run's noise " +
			"alone moves a ratio, and a gw/proxy ratio within " +
			"that distance of a limit is not a verdict on the gateway. The targets below hold each verdict against the widest the two proxies " +
			"disagreed in any round, and give the range over rounds.\n\n")
	}
	if hasStolen(res) {
		p("**stolen** is the share of each measurement's time the hypervisor took from CPU %d, where the systems under test run "+
			"(`/proc/stat`, median over the rounds). While it is taken nothing there runs: a stall of tens of milliseconds "+
			"sets a p99 by itself, for whichever target was being measured. A verdict below whose measurements lost more than "+
			"%.0f%% (%.0f%% for p99, which the slowest 1%% of calls decide) is marked noisy.\n\n", s.SUTCPU, stolenLimit*100, stolenLimitP99*100)
	}

	if j := res.Jitter; j != nil {
		p("Noise floor: 1 ms sleeps on the load generator's CPU wake up late by p50 %s, p99 %s, max %s (%v of sleeps). "+
			"Latency percentiles at or below these values are the machine's, not the targets'.\n\n",
			ms(j.P50), ms(j.P99), ms(j.Max), s.Jitter)
	}
}

// renderLatency is the fixed-rate latency table, with the CPU, GC and stall-free tables after it.
func renderLatency(p func(string, ...any), res *Results) {
	s := res.Settings
	if len(res.Latency) == 0 {
		return
	}
	p("### Fixed-rate latency\n\n")
	p("Small non-streaming chat call (`%s`, max_tokens 64), open loop (vegeta), %v per rate and target after a %v warm-up at that rate. "+
		"Latencies are the answered (2xx) calls'; **success** is the share answered (past its capacity the gateway refuses calls with 503 `overloaded`).\n\n",
		s.Model, s.Duration, s.Warmup)
	p("| rate/s | target | p50 | p90 | p99 | max | success | sent/s | stolen | overhead p50 | overhead p90 | overhead p99 | overhead max |\n")
	p("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, rate := range s.Rates {
		d := aggLatency(res.Latency, "direct", rate)
		px := aggLatency(res.Latency, "proxy", rate)
		for _, name := range targetNames {
			a := aggLatency(res.Latency, name, rate)
			if !a.ok {
				continue
			}
			over := "— | — | — | —"
			if name != "direct" && d.ok && !a.Lat.none() && !d.Lat.none() {
				o := a.Lat.sub(d.Lat)
				over = fmt.Sprintf("%s | %s | %s | %s", signedMs(o.P50), signedMs(o.P90), signedMs(o.P99), signedMs(o.Max))
			}
			p("| %d | %s | %s | %s | %s | %s | %s | %.0f | %s | %s |\n", rate, name, msOf(a.Lat, a.Lat.P50), msOf(a.Lat, a.Lat.P90),
				msOf(a.Lat, a.Lat.P99), msOf(a.Lat, a.Lat.Max), pct(a.Success), a.Sent, stolenCell(a.Stolen), over)
		}
		for _, r := range ratioRows {
			if g := aggLatency(res.Latency, r[0], rate); g.ok && px.ok && d.ok && !g.Lat.none() && !px.Lat.none() && !d.Lat.none() {
				og, op := g.Lat.sub(d.Lat), px.Lat.sub(d.Lat)
				p("| %d | **%s** | | | | | | | | %s | %s | %s | %s |\n", rate, r[1],
					ratio(float64(og.P50), float64(op.P50)), ratio(float64(og.P90), float64(op.P90)),
					ratio(float64(og.P99), float64(op.P99)), ratio(float64(og.Max), float64(op.Max)))
			}
		}
		// Two gateways' overheads over the same direct: the difference is
		// the translation's or the PostgreSQL ledger's share.
		for _, r := range [][2]string{{gatewayX, "x − gw"}, {gatewayPG, "pg − gw"}} {
			if g, o := aggLatency(res.Latency, "gateway", rate), aggLatency(res.Latency, r[0], rate); g.ok && o.ok && !g.Lat.none() && !o.Lat.none() {
				d := o.Lat.sub(g.Lat)
				p("| %d | **%s** | | | | | | | | %s | %s | %s | %s |\n", rate, r[1], signedMs(d.P50), signedMs(d.P90), signedMs(d.P99), signedMs(d.Max))
			}
		}
	}
	p("\n")
	renderCPU(p, res)
	renderGC(p, res)
	renderClear(p, res)
}

// renderThroughput is the maximum throughput table.
func renderThroughput(p func(string, ...any), res *Results) {
	s := res.Settings
	if len(res.Throughput) == 0 {
		return
	}
	p("### Maximum throughput\n\n")
	p("As fast as possible (vegeta rate 0) with %d workers on %d keep-alive connections, %v per target after a %v warm-up.\n\n",
		s.Conns, s.Conns, s.TPDuration, s.Warmup)
	p("| target | requests/s | success | p50 | p99 | stolen | ÷ proxy | ÷ gateway |\n|---|---:|---:|---:|---:|---:|---:|---:|\n")
	px, gw := aggThroughput(res.Throughput, "proxy"), aggThroughput(res.Throughput, "gateway")
	for _, name := range targetNames {
		a := aggThroughput(res.Throughput, name)
		if !a.ok {
			continue
		}
		r, rg := "—", "—"
		if name != "proxy" && px.ok {
			r = ratio(a.Throughput, px.Throughput)
		}
		if (name == gatewayPG || name == gatewayX) && gw.ok {
			rg = ratio(a.Throughput, gw.Throughput)
		}
		p("| %s | %.0f | %s | %s | %s | %s | %s | %s |\n", name, a.Throughput, pct(a.Success), msOf(a.Lat, a.Lat.P50), msOf(a.Lat, a.Lat.P99), stolenCell(a.Stolen), r, rg)
	}
	p("\n")
}

// renderStreaming is the streaming table.
func renderStreaming(p func(string, ...any), res *Results) {
	s := res.Settings
	if len(res.Stream) == 0 {
		return
	}
	p("### Streaming\n\n")
	p("Streamed chat call, %d content chunks %v apart from the provider; %d streams started per second (open loop) for %v per target after a %v warm-up. "+
		"TTFB = until the first complete SSE event; total = until `data: [DONE]`.\n\n",
		s.Chunks, s.ChunkGap, s.StreamRate, s.StreamDuration, s.Warmup)
	p("| target | TTFB p50 | TTFB p99 | total p50 | total p99 | success | streams | stolen | TTFB overhead p50 | TTFB overhead p99 | total overhead p50 | total overhead p99 |\n")
	p("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	d := aggStream(res.Stream, "direct")
	for _, name := range targetNames {
		a := aggStream(res.Stream, name)
		if !a.ok {
			continue
		}
		over := "— | — | — | —"
		if name != "direct" && d.ok && !a.TTFB.none() && !d.TTFB.none() {
			o1, o2 := a.TTFB.sub(d.TTFB), a.Total.sub(d.Total)
			over = fmt.Sprintf("%s | %s | %s | %s", signedMs(o1.P50), signedMs(o1.P99), signedMs(o2.P50), signedMs(o2.P99))
		}
		p("| %s | %s | %s | %s | %s | %s | %d | %s | %s |\n", name, msOf(a.TTFB, a.TTFB.P50), msOf(a.TTFB, a.TTFB.P99), msOf(a.Total, a.Total.P50), msOf(a.Total, a.Total.P99),
			pct(a.Success), a.Streams, stolenCell(a.Stolen), over)
	}
	for _, r := range ratioRows {
		if g, px := aggStream(res.Stream, r[0]), aggStream(res.Stream, "proxy"); g.ok && px.ok && d.ok && !g.TTFB.none() && !px.TTFB.none() && !d.TTFB.none() {
			g1, g2, p1, p2 := g.TTFB.sub(d.TTFB), g.Total.sub(d.Total), px.TTFB.sub(d.TTFB), px.Total.sub(d.Total)
			p("| **%s** | | | | | | | | %s | %s | %s | %s |\n", r[1], ratio(float64(g1.P50), float64(p1.P50)), ratio(float64(g1.P99), float64(p1.P99)),
				ratio(float64(g2.P50), float64(p2.P50)), ratio(float64(g2.P99), float64(p2.P99)))
		}
	}
	p("\n")
}

// renderRSS is the memory table of the open-streams test, split by kind of mapping when smaps was read.
func renderRSS(p func(string, ...any), res *Results) {
	s := res.Settings
	if len(res.RSS) == 0 {
		return
	}
	p("### Memory with %d concurrent open streams\n\n", s.OpenStreams)
	p("Streams opened at %d/s against a provider that sends one chunk per second; VmRSS sampled 8 times, 250 ms apart, once every stream had its first event.\n\n", s.OpenRate)
	p("| process | VmRSS idle | VmRSS with streams open (max) | of which anonymous / file-backed | opened | failed | still open after sampling | VmHWM |\n")
	p("|---|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range res.RSS {
		p("| %s | %s | %s | %s / %s | %d | %d | %d | %s |\n", r.Target, mb(r.Before), mb(r.During), mb(r.Anon), mb(r.File),
			r.Opened, r.Failed, r.OpenNow, mb(r.HWM))
	}
	p("\n")
	if slices.ContainsFunc(res.RSS, func(r RSSRun) bool { return r.Parts != nil }) {
		p("The same sample by kind of mapping (`/proc/PID/smaps`): anonymous data is the Go heap (with the plugins' guest memories), stacks and the runtime's own; anonymous code is native code compiled at run time (wazero's, from the plugins); data files are the other mapped files and shared memory (the gateway's are the ledger's tables and logs and the hold log).\n\n")
		p("| process | anonymous data | anonymous code | data files | program and libraries |\n")
		p("|---|---:|---:|---:|---:|\n")
		for _, r := range res.RSS {
			if r.Parts != nil {
				p("| %s | %s | %s | %s | %s |\n", r.Target, mb(r.Parts.Data), mb(r.Parts.Code), mb(r.Parts.Files), mb(r.Parts.Program))
			}
		}
		p("\n")
	}
}

// renderPeak is the peak RSS of each process after each phase.
func renderPeak(p func(string, ...any), res *Results) {
	if len(res.Peak) == 0 {
		return
	}
	p("### Peak RSS (VmHWM) after each phase\n\n")
	var procs, phases []string
	hwm := map[[2]string]int64{}
	last := map[string]PeakRSS{}
	for _, pk := range res.Peak {
		if !slices.Contains(procs, pk.Process) {
			procs = append(procs, pk.Process)
		}
		if !slices.Contains(phases, pk.Phase) {
			phases = append(phases, pk.Phase)
		}
		hwm[[2]string{pk.Process, pk.Phase}] = pk.HWM
		last[pk.Process] = pk
	}
	p("| process | %s | VmRSS at the end: anonymous / file-backed |\n|---|%s---:|\n", strings.Join(phases, " | "), strings.Repeat("---:|", len(phases)))
	for _, pr := range procs {
		var cells []string
		for _, ph := range phases {
			if v, ok := hwm[[2]string{pr, ph}]; ok {
				cells = append(cells, mb(v))
			} else {
				cells = append(cells, "—")
			}
		}
		l := last[pr]
		p("| %s | %s | %s / %s |\n", pr, strings.Join(cells, " | "), mb(l.Anon), mb(l.File))
	}
	p("\n")
}

// renderTargets is the verdict tables: the overhead's, and the PostgreSQL ledger's when gateway-pg ran.
func renderTargets(p func(string, ...any), res *Results) {
	s := res.Settings
	p("### Targets: the overhead over the bare proxy\n\n| target | measured | verdict |\n|---|---|---|\n")
	for _, row := range targetRows(res) {
		p("| %s | %s | %s |\n", row[0], row[1], row[2])
	}
	p("\n")
	if hasX(res) {
		p("### Targets: translation, chat → Gemini → chat\n\n")
		p("gateway-x against the pass-through gateway of the same run, measured side by side. Added = overhead over direct at the same percentile.\n\n")
		p("| target | measured | verdict |\n|---|---|---|\n")
		for _, row := range xTargetRows(res) {
			p("| %s | %s | %s |\n", row[0], row[1], row[2])
		}
		p("\n")
	}
	if hasPG(res) {
		p("### Targets: the ledger on PostgreSQL, synchronous_commit %s\n\n", s.PGSync)
		p("gateway-pg against the Badger gateway of the same run. Added = overhead over direct at the same percentile.\n\n")
		p("| target | measured | verdict |\n|---|---|---|\n")
		for _, row := range pgTargetRows(res) {
			p("| %s | %s | %s |\n", row[0], row[1], row[2])
		}
		p("\n")
	}
}

// renderErrors lists the errors seen, when there were any.
func renderErrors(p func(string, ...any), res *Results) {
	errs := allErrors(res)
	if len(errs) == 0 {
		return
	}
	p("### Errors seen\n\n")
	for _, e := range errs {
		p("- %s\n", strings.ReplaceAll(e, "\n", " "))
	}
	p("\n")
}

// renderClear is the latency table again, of the calls no stall touched.
func renderClear(p func(string, ...any), res *Results) {
	if !slices.ContainsFunc(res.Latency, func(r LatencyRun) bool { return r.Clear != nil }) {
		return
	}
	s := res.Settings
	p("#### The calls no stall touched\n\n")
	p("The same measurements, without the calls a stall of the load generator's or the targets' CPU could have delayed. "+
		"The load generator read both CPUs' steal every %v; a reading that found steal charged marks a **stall**, and every "+
		"call in flight from a tick before the stall could have begun (its ticks, plus one for the counter's rounding) until %v "+
		"after it ended (twice its length, if longer: the calls that came meanwhile wait for the backlog) is **excluded**. "+
		"The percentiles below are the other calls' (medians over the rounds); **stalls**, **stolen** (both CPUs, in 10 ms ticks) and **excluded** "+
		"are totals over the rounds. The raw percentiles above are the verdicts'; the targets give this p99 for information. "+
		"A stall shorter than a tick can go unseen, so these are an upper bound on what the targets add on a quiet host.\n\n", stallSample, stallDrain)
	p("| rate/s | target | stalls | stolen | excluded | p50 | p90 | p99 | max | overhead p50 | overhead p99 | overhead max |\n")
	p("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, rate := range s.Rates {
		d := aggLatency(res.Latency, "direct", rate)
		for _, name := range targetNames {
			a := aggLatency(res.Latency, name, rate)
			if !a.ok || a.Clear == nil {
				continue
			}
			c := a.Clear
			over := "— | — | —"
			if name != "direct" && d.Clear != nil && !c.Lat.none() && !d.Clear.Lat.none() {
				o := c.Lat.sub(d.Clear.Lat)
				over = fmt.Sprintf("%s | %s | %s", signedMs(o.P50), signedMs(o.P99), signedMs(o.Max))
			}
			p("| %d | %s | %d | %d ms | %s | %s | %s | %s | %s | %s |\n", rate, name, c.Stalls, c.Ticks*int64(tickDur/time.Millisecond),
				pct(c.excludedShare()), msOf(c.Lat, c.Lat.P50), msOf(c.Lat, c.Lat.P90), msOf(c.Lat, c.Lat.P99), msOf(c.Lat, c.Lat.Max), over)
		}
	}
	p("\n")
}

// renderCPU is the CPU time per call of each target's processes, from the
// runs that measured it (-sim-pid).
func renderCPU(p func(string, ...any), res *Results) {
	if !slices.ContainsFunc(res.Latency, func(r LatencyRun) bool { return r.CPU != nil }) {
		return
	}
	p("#### CPU time per call\n\n")
	p("The CPU time the target's own process (**hop**) and the provider ran during each measurement, divided by the calls made " +
		"(the sum over their threads of `/proc/PID/task/*/schedstat`, medians over the rounds). Both run on the CPU the systems under test share: " +
		"**total** is how long each call keeps it busy, and the busier it is the longer any burst of work (a collection, a stall) " +
		"keeps calls waiting, so a hop's tail grows with its total before its median does.\n\n")
	if hasPG(res) {
		p("**database** is, for gateway-pg, the CPU time of the PostgreSQL processes serving its database (its connections' backends, " +
			"which do the statements and, with synchronous_commit on, their own WAL flushes; the server's shared WAL writer is not counted). " +
			"They are not pinned: they may run on the load generator's CPU as well as on the targets'. **total** adds them in; " +
			"**hop + database ÷ gateway's** is gateway-pg's hop and database against the Badger gateway's hop, whose ledger runs inside it.\n\n")
	}
	if hasX(res) {
		p("For gateway-x, **hop + database ÷ gateway's** is its hop against the pass-through gateway's: the CPU translation costs.\n\n")
	}
	p("| rate/s | target | hop | database | provider | total | hop ÷ proxy's | hop + database ÷ gateway's |\n|---:|---|---:|---:|---:|---:|---:|---:|\n")
	for _, rate := range res.Settings.Rates {
		px := aggLatency(res.Latency, "proxy", rate).CPU
		gw := aggLatency(res.Latency, "gateway", rate).CPU
		for _, name := range targetNames {
			c := aggLatency(res.Latency, name, rate).CPU
			if c == nil {
				continue
			}
			hop, db, total, vs, vg := "—", "—", micros(c.Provider), "—", "—"
			if name != "direct" {
				total = "—" // a hop whose process was not read: no total
				if c.Hop > 0 {
					hop, total = micros(c.Hop), micros(c.Hop+c.DB+c.Provider)
					if px != nil && px.Hop > 0 {
						vs = ratio(float64(c.Hop), float64(px.Hop))
					}
				}
			}
			if name == gatewayPG {
				db = micros(c.DB)
			}
			if name == gatewayPG || name == gatewayX {
				if gw != nil && gw.Hop > 0 && c.Hop > 0 {
					vg = ratio(float64(c.Hop+c.DB), float64(gw.Hop))
				}
			}
			p("| %d | %s | %s | %s | %s | %s | %s | %s |\n", rate, name, hop, db, micros(c.Provider), total, vs, vg)
		}
	}
	p("\n")
}

// renderGC is the gateway's collector at each rate, from the runs that read
// its /metrics.
func renderGC(p func(string, ...any), res *Results) {
	if !slices.ContainsFunc(res.Latency, func(r LatencyRun) bool { return r.GC != nil }) {
		return
	}
	p("#### The gateway's collector\n\n")
	p("Garbage collections the gateway ran during its measurements and the bytes it allocated per call (`go_gc_duration_seconds` and " +
		"`go_memstats_alloc_bytes_total` from its `/metrics` before and after each, summed over the rounds). Each collection's background " +
		"work is a burst of CPU on the CPU the provider shares; they come as often as the bytes allocated fill the heap's headroom.\n\n")
	p("| rate/s | target | collections | calls | calls per collection | allocated per call |\n|---:|---|---:|---:|---:|---:|\n")
	for _, rate := range res.Settings.Rates {
		for _, name := range []string{"gateway", gatewayX, gatewayPG} {
			g := aggLatency(res.Latency, name, rate).GC
			if g == nil || g.Calls == 0 {
				continue
			}
			per := "—"
			if g.Collections > 0 {
				per = fmt.Sprintf("%d", g.Calls/g.Collections)
			}
			p("| %d | %s | %d | %d | %s | %.1f KB |\n", rate, name, g.Collections, g.Calls, per, float64(g.Bytes)/float64(g.Calls)/1000)
		}
	}
	p("\n")
}
