package main

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelrelay/modelrelay/pricing"
)

// videoCall is one request of a video job to replica addr: its status and
// body.
func videoCall(t *testing.T, method, addr, path, key, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+addr+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := replicaClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, data
}

// Video jobs created on one replica are polled, refunded and fetched on any
// other: a failed job polled on two replicas at once is refunded exactly
// once, and a finished job's content comes from a third.
func TestReplicasShareVideoJobs(t *testing.T) {
	needPostgres(t)
	dsn := replicaDatabase(t)
	simAddr := freeAddr(t)
	startSim(t, simAddr, "-video-steps", "50ms")
	reps := startReplicas(t, 3, replicaOpts{dsn: dsn, sim: simAddr, lease: 30 * time.Second})
	key := newAccount(t, reps[0].addr, "acme", 10*pricing.NanoPerUSD)
	good, failed := createVideo(t, reps[0].addr, key, "a calm sea"), createVideo(t, reps[0].addr, key, "[fail] a storm")

	// Poll the failed job on replicas 1 and 2 at once until both see it
	// failed.
	var wg sync.WaitGroup
	for _, r := range reps[1:] {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pollUntilFailed(t, r.addr, key, failed)
		}()
	}
	wg.Wait()
	// The finished job's status on replica 1, its content on replica 2.
	deadline := time.Now().Add(20 * time.Second)
	for {
		st, data := videoCall(t, "GET", reps[1].addr, "/v1/videos/"+good, key, "")
		if st == 200 && strings.Contains(string(data), `"done"`) {
			break
		}
		if st != 200 || time.Now().After(deadline) {
			t.Fatalf("poll of the good job on replica 1: %d %s", st, data)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if st, data := videoCall(t, "GET", reps[2].addr, "/v1/videos/"+good+"/content", key, ""); st != 200 || !strings.Contains(string(data[:min(len(data), 16)]), "ftyp") {
		t.Fatalf("content on replica 2: %d %.40q", st, data)
	}
	// More polls anywhere change nothing.
	for _, r := range reps {
		videoCall(t, "GET", r.addr, "/v1/videos/"+failed, key, "")
	}
	checkVideoBooks(t, reps, failed)
}

// createVideo creates a 5 s video job of prompt on the replica at addr
// and returns its id.
func createVideo(t *testing.T, addr, key, prompt string) string {
	t.Helper()
	st, data := videoCall(t, "POST", addr, "/v1/videos/generations", key,
		`{"model":"modelc-imagine-video-1.5","prompt":"`+prompt+`","duration":5,"resolution":"720p"}`)
	var r struct {
		RequestID string `json:"request_id"`
	}
	if st != 200 || json.Unmarshal(data, &r) != nil || r.RequestID == "" {
		t.Fatalf("create on replica 0: %d %s", st, data)
	}
	return r.RequestID
}

// pollUntilFailed polls job id on the replica at addr for up to 20 s until
// it shows the job failed; it may run in a goroutine of its own.
func pollUntilFailed(t *testing.T, addr, key, id string) {
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		st, data := videoCall(t, "GET", addr, "/v1/videos/"+id, key, "")
		if st != 200 {
			t.Errorf("poll on %s: %d %s", addr, st, data)
			return
		}
		if strings.Contains(string(data), `"failed"`) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Errorf("the job never failed on %s", addr)
}

// checkVideoBooks wants one 0.5 USD charge per job, exactly one refund, of
// the failed job, and the books at 9.5 USD with nothing held.
func checkVideoBooks(t *testing.T, reps []*gatewayProc, failed string) {
	t.Helper()
	refunds, charges := map[string]int{}, 0
	for _, e := range journal(t, reps[2].addr, "acme") {
		switch e.Kind {
		case "refund":
			refunds[e.RequestID]++
			if e.Amount != 500_000_000 {
				t.Errorf("refund of %s: %s USD, want 0.5", e.RequestID, e.Amount)
			}
		case "charge": // under the gateway's request id; the job's id is the provider's
			if e.Amount != -500_000_000 {
				t.Errorf("charge %s: %s USD, want -0.5", e.RequestID, e.Amount)
			}
			charges++
		}
	}
	if refunds[failed] != 1 || len(refunds) != 1 {
		t.Fatalf("refunds %v: want exactly one, of the failed job %s", refunds, failed)
	}
	if charges != 2 {
		t.Fatalf("%d charges: want one per job", charges)
	}
	var sum pricing.Nano
	for _, e := range journal(t, reps[1].addr, "acme") {
		sum += e.Amount
	}
	if a := account(t, reps[1].addr, "acme"); a.Balance != int64(sum) || a.Balance != 9_500_000_000 || a.Held != 0 {
		t.Fatalf("books: %+v, Σ journal %d; want 9.5 USD (10 − two 0.5 jobs + one refund), nothing held", a, sum)
	}
}
