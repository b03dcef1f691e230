package main

import (
	"fmt"
	"time"
)

// Limits of the translating gateway (gateway-x: its line speaks Gemini, so
// every chat call is translated to generateContent and its answer back)
// against the pass-through gateway of the same run: same model, route,
// prices, ledger and plugins, so the difference is the translation's.
const (
	limitXThroughput = 0.9                    // gateway-x's max throughput ≥ 0.9 × the gateway's
	limitXAddedP50   = 100 * time.Microsecond // gateway-x's added p50 at 1,000/s ≤ the gateway's + 0.1 ms
	limitXTTFB       = 100 * time.Microsecond // gateway-x's stream p50 time to first event ≤ the gateway's + 0.1 ms
)

// xTargetRows evaluates the translation's limits against the medians. As
// for the other targets, the A/A control gives the noise: how far two
// identical bare proxies measured apart in any round, on each limit's terms.
func xTargetRows(res *Results) [][3]string {
	return [][3]string{xThroughputRow(res), xP50Row(res), xStreamRow(res)}
}

func xThroughputRow(res *Results) [3]string {
	name := "translated max throughput ≥ 0.9× gateway's"
	tg, tx := aggThroughput(res.Throughput, "gateway"), aggThroughput(res.Throughput, gatewayX)
	if !tg.ok || !tx.ok || tg.Throughput <= 0 {
		return notMeasured(name)
	}
	m := fmt.Sprintf("gateway-x %.0f/s, gateway %.0f/s: %s", tx.Throughput, tg.Throughput, ratio(tx.Throughput, tg.Throughput))
	v := verdict(tx.Throughput >= limitXThroughput*tg.Throughput)
	if tp, tc := aggThroughput(res.Throughput, "proxy"), aggThroughput(res.Throughput, "control"); tp.ok && tc.ok && tp.Throughput > 0 {
		spreads := throughputSpreads(res)
		m += fmt.Sprintf(" (control/proxy %s", ratio(tc.Throughput, tp.Throughput))
		m += spreadRange(spreads, "", func(f float64) string { return fmt.Sprintf("%.2f×", 1+f) }) + ")"
		v += noise(tx.Throughput/tg.Throughput-limitXThroughput, widest(spreads, tc.Throughput/tp.Throughput-1))
	}
	if tx.Success < 1 {
		m += fmt.Sprintf("; gateway-x answered %s", pct(tx.Success))
	}
	return [3]string{name, m, v + stolenNote(stolenLimit, tg.Stolen, tx.Stolen)}
}

func xP50Row(res *Results) [3]string {
	name := "translated added p50 at 1,000 req/s within +0.1 ms of gateway's"
	d, g, x := aggLatency(res.Latency, "direct", targetRate), aggLatency(res.Latency, "gateway", targetRate), aggLatency(res.Latency, gatewayX, targetRate)
	if !d.ok || !g.ok || !x.ok || d.Lat.none() || g.Lat.none() || x.Lat.none() {
		return notMeasured(name)
	}
	og, ox := g.Lat.P50-d.Lat.P50, x.Lat.P50-d.Lat.P50
	diff := ox - og
	short := refusedNote(namedShare{gatewayX, x.Success}, namedShare{"gateway", g.Success})
	m := fmt.Sprintf("gateway-x %s, gateway %s: %s", signedMs(ox), signedMs(og), signedMs(diff))
	v := verdict(diff <= limitXAddedP50 && short == "")
	px, c := aggLatency(res.Latency, "proxy", targetRate), aggLatency(res.Latency, "control", targetRate)
	if px.ok && c.ok && !px.Lat.none() && !c.Lat.none() {
		spreads := latencySpreads(res, func(l Lat) time.Duration { return l.P50 })
		m += fmt.Sprintf(" (control − proxy %s", signedMs(c.Lat.P50-px.Lat.P50))
		m += spreadRange(spreads, "", func(f float64) string { return signedMs(time.Duration(f)) }) + ")"
		v += noise(float64(diff-limitXAddedP50), widest(spreads, float64(c.Lat.P50-px.Lat.P50)))
	}
	return [3]string{name, m, v + short + stolenNote(stolenLimit, d.Stolen, g.Stolen, x.Stolen)}
}

func xStreamRow(res *Results) [3]string {
	name := "translated stream time to first event within +0.1 ms of gateway's"
	sg, sx := aggStream(res.Stream, "gateway"), aggStream(res.Stream, gatewayX)
	if !sg.ok || !sx.ok || sg.TTFB.none() || sx.TTFB.none() {
		return notMeasured(name)
	}
	diff := sx.TTFB.P50 - sg.TTFB.P50
	short := refusedNote(namedShare{gatewayX, sx.Success}, namedShare{"gateway", sg.Success})
	m := fmt.Sprintf("p50 gateway-x %s, gateway %s: %s", ms(sx.TTFB.P50), ms(sg.TTFB.P50), signedMs(diff))
	v := verdict(diff <= limitXTTFB && short == "")
	sp, sc := aggStream(res.Stream, "proxy"), aggStream(res.Stream, "control")
	if sp.ok && sc.ok && !sp.TTFB.none() && !sc.TTFB.none() {
		spreads := streamSpreads(res)
		m += fmt.Sprintf(" (control − proxy %s", signedMs(sc.TTFB.P50-sp.TTFB.P50))
		m += spreadRange(spreads, "", func(f float64) string { return signedMs(time.Duration(f)) }) + ")"
		v += noise(float64(diff-limitXTTFB), widest(spreads, float64(sc.TTFB.P50-sp.TTFB.P50)))
	}
	return [3]string{name, m, v + short + stolenNote(stolenLimit, sg.Stolen, sx.Stolen)}
}
