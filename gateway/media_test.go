package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"

	"github.com/modelrelay/modelrelay/gateway/config"
	"github.com/modelrelay/modelrelay/internal/testwait"
	"github.com/modelrelay/modelrelay/pricing"
	"github.com/modelrelay/modelrelay/sim"
	"github.com/modelrelay/modelrelay/store"
)

func needModels(t *testing.T, e *env, models ...string) {
	t.Helper()
	for _, m := range models {
		if _, ok := e.host.Catalog().Model(m); !ok {
			t.Fatalf("model %s is not in the catalogue: build its plugin (make plugins)", m)
		}
	}
}

func TestImages(t *testing.T) {
	t.Parallel()
	cp := &capture{sim: sim.New(sim.Options{})}
	up := httptest.NewServer(cp)
	defer up.Close()
	e := newEnv(t, func(c *config.Config) { c.Lines[0].BaseURL = up.URL }) // std-a
	needModels(t, e, "modelb-image-2.5-flare", "modelb-image-2.5-sunburst")
	e.account("acme", "20")
	key := e.key("acme", "standard")
	c := sdkClient(e, key)
	ctx := context.Background()

	cases := []struct {
		name   string
		size   string // "" = omitted
		n      int64
		charge pricing.Nano
		sent   string // the size the provider is asked for
	}{
		{"1K tier", "1024x1024", 1, 30_000_000, "1024x1024"}, // $0.03
		{"1K tier n=2", "512x768", 2, 60_000_000, "512x768"}, // 2 × $0.03
		{"2K tier n=3", "2048x2048", 3, 150_000_000, "2048x2048"},
		{"2K tier just above 1K", "1024x1025", 1, 50_000_000, "1024x1025"},
		{"omitted size pinned", "", 1, 30_000_000, "1024x1024"},
		{"auto size pinned", "auto", 1, 30_000_000, "1024x1024"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := openai.ImageGenerateParams{Model: "modelb-image-2.5-flare", Prompt: "a lighthouse", N: openai.Int(tc.n)}
			if tc.size != "" {
				p.Size = openai.ImageGenerateParamsSize(tc.size)
			}
			res, err := c.Images.Generate(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			if int64(len(res.Data)) != tc.n || res.Data[0].B64JSON == "" {
				t.Fatalf("%d images", len(res.Data))
			}
			if ch := lastCharge(t, e, "acme"); ch.Amount != -tc.charge || ch.Usage.Images != tc.n {
				t.Fatalf("charge %+v, want %d", ch, tc.charge)
			}
			_, sent := cp.last()
			var body struct {
				Size string `json:"size"`
			}
			json.Unmarshal(sent, &body)
			if body.Size != tc.sent {
				t.Fatalf("provider asked for size %q, want %q (%s)", body.Size, tc.sent, sent)
			}
		})
	}
	before := e.balance("acme").Balance
	for _, tc := range []struct{ name, body, field string }{
		{"upper-case X", `{"model":"modelb-image-2.5-flare","prompt":"x","size":"1024X1024"}`, "size"},
		{"no height", `{"model":"modelb-image-2.5-flare","prompt":"x","size":"1024"}`, "size"},
		{"too large", `{"model":"modelb-image-2.5-flare","prompt":"x","size":"4096x4096"}`, "size"},
		{"n zero", `{"model":"modelb-image-2.5-flare","prompt":"x","n":0}`, "n"},
		{"n 129", `{"model":"modelb-image-2.5-flare","prompt":"x","n":129}`, "n"},
		{"n text", `{"model":"modelb-image-2.5-flare","prompt":"x","n":"two"}`, "n"},
		{"bad quality", `{"model":"modelb-image-2.5-flare","prompt":"x","quality":"ultra"}`, "quality"},
		{"no prompt", `{"model":"modelb-image-2.5-flare"}`, "prompt"},
	} {
		st, _, data := e.do("POST", "/v1/images/generations", key, tc.body)
		msg, _, _ := errBody(t, data)
		if st != 400 || !strings.Contains(msg, tc.field) {
			t.Errorf("%s: %d %q", tc.name, st, msg)
		}
	}
	if st, _, data := e.do("POST", "/v1/images/generations", key, `{"model":"modelf-flash","prompt":"x"}`); st != 403 {
		t.Errorf("text model on images: %d %s", st, data)
	}
	if b := e.balance("acme"); b.Balance != before || b.Held != 0 {
		t.Fatalf("rejected requests were charged: %+v", b)
	}
	// Charged on success only.
	cp.sim.SetOptions(sim.Options{Status: 400})
	if st, _, _ := e.do("POST", "/v1/images/generations", key, `{"model":"modelb-image-2.5-flare","prompt":"x"}`); st != 400 {
		t.Fatalf("provider 400: %d", st)
	}
	if b := e.balance("acme"); b.Balance != before {
		t.Fatalf("a failed image call was charged")
	}
}

// namedReader gives the SDK a file name for the multipart part.
type namedReader struct {
	*bytes.Reader
	name string
}

func (n namedReader) Name() string { return n.name }

func TestImageEdits(t *testing.T) {
	// Not parallel: it sets TMPDIR (t.Setenv).
	// Any temporary file Go's multipart code would create lands in TMPDIR.
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	e := newEnv(t)
	needModels(t, e, "modelb-image-2.5-sunburst")
	e.account("acme", "20")
	key := e.key("acme", "standard")
	c := sdkClient(e, key)
	big := bytes.Repeat([]byte("PNGDATA!"), 12<<20/8) // 12 MiB: above every multipart memory threshold
	var watching atomic.Bool
	watching.Store(true)
	var leaked atomic.Value
	go func() {
		for watching.Load() {
			if ents, _ := os.ReadDir(tmp); len(ents) > 0 {
				leaked.Store(ents[0].Name())
			}
			time.Sleep(time.Millisecond) // the watcher's sampling interval, not a wait
		}
	}()
	res, err := c.Images.Edit(context.Background(), openai.ImageEditParams{
		Model: "modelb-image-2.5-sunburst", Prompt: "add a hat", Size: "2048x1536", N: openai.Int(2),
		Image: openai.ImageEditParamsImageUnion{OfFile: namedReader{bytes.NewReader(big), "cat.png"}},
	})
	watching.Store(false)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Data) != 2 {
		t.Fatalf("%d images", len(res.Data))
	}
	// 2048×1536 = 3,145,728 px: the 2K tier. 2 × $0.05 = 100_000_000 nano.
	if ch := lastCharge(t, e, "acme"); ch.Amount != -100_000_000 {
		t.Fatalf("edit charge %+v", ch)
	}
	if name := leaked.Load(); name != nil {
		t.Fatalf("an upload was written to disk: %s", name)
	}
	if ents, _ := os.ReadDir(tmp); len(ents) != 0 {
		t.Fatalf("temporary files left: %v", ents)
	}

	form := func(fields map[string]string, file bool) (string, []byte) {
		var b bytes.Buffer
		mw := multipart.NewWriter(&b)
		for k, v := range fields {
			mw.WriteField(k, v)
		}
		if file {
			fw, _ := mw.CreateFormFile("image", "a.png")
			fw.Write([]byte("png"))
		}
		mw.Close()
		return mw.FormDataContentType(), b.Bytes()
	}
	for _, tc := range []struct {
		name   string
		fields map[string]string
		file   bool
		field  string
	}{
		{"no image", map[string]string{"model": "modelb-image-2.5-sunburst", "prompt": "x"}, false, "image"},
		{"no prompt", map[string]string{"model": "modelb-image-2.5-sunburst"}, true, "prompt"},
		{"bad size", map[string]string{"model": "modelb-image-2.5-sunburst", "prompt": "x", "size": "big"}, true, "size"},
		{"bad n", map[string]string{"model": "modelb-image-2.5-sunburst", "prompt": "x", "n": "500"}, true, "n"},
	} {
		ct, body := form(tc.fields, tc.file)
		st, _, data := e.do("POST", "/v1/images/edits", key, body, "Content-Type", ct)
		msg, _, _ := errBody(t, data)
		if st != 400 || !strings.Contains(msg, tc.field) {
			t.Errorf("%s: %d %q", tc.name, st, msg)
		}
	}
	st, _, data := e.do("POST", "/v1/images/edits", key, `{"model":"x"}`)
	if st != 400 || !strings.Contains(string(data), "multipart/form-data") {
		t.Errorf("JSON edit: %d %s", st, data)
	}
}

// A video job is charged by its duration and resolution when it is
// accepted, its status and content are read with any key of the account
// and no other, and a failed job is refunded exactly once.
func TestVideoJobs(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	needModels(t, e, "modelc-imagine-video-1.5")
	e.account("acme", "20")
	e.account("other", "20")
	v := videoJobs{t: t, e: e, key: e.key("acme", "standard")}
	key2 := e.key("acme", "auto") // same account, another key
	stranger := e.key("other", "standard")

	id := checkVideoPrices(v)
	checkVideoContent(v, id, key2, stranger)
	checkFailedVideoRefundedOnce(v, id)
	for _, tc := range []struct{ body, field string }{
		{`{"model":"modelc-imagine-video-1.5","prompt":"x","duration":16}`, "duration"},
		{`{"model":"modelc-imagine-video-1.5","prompt":"x","duration":0}`, "duration"},
		{`{"model":"modelc-imagine-video-1.5","prompt":"x","resolution":"4k"}`, "resolution"},
		{`{"model":"modelc-imagine-video-1.5"}`, "prompt"},
	} {
		st, _, data := e.do("POST", "/v1/videos/generations", v.key, tc.body)
		if msg, _, _ := errBody(t, data); st != 400 || !strings.Contains(msg, tc.field) {
			t.Errorf("%s: %d %q", tc.body, st, msg)
		}
	}
	if st, _, _ := e.do("POST", "/v1/videos/generations", v.key, `{"model":"modelb-image-2.5-flare","prompt":"x"}`); st != 403 {
		t.Errorf("image model on video: %d", st)
	}
}

// videoJobs creates the video jobs of TestVideoJobs with key, on account acme.
type videoJobs struct {
	t   *testing.T
	e   *env
	key string
}

// create creates a job of body and returns its id and its charge.
func (v videoJobs) create(body string) (string, store.Entry) {
	t := v.t
	t.Helper()
	st, _, data := v.e.do("POST", "/v1/videos/generations", v.key, body)
	if st != 200 {
		t.Fatalf("create: %d %s", st, data)
	}
	var r struct {
		RequestID string `json:"request_id"`
		Model     string `json:"model"`
	}
	if err := json.Unmarshal(data, &r); err != nil || r.RequestID == "" || r.Model != "modelc-imagine-video-1.5" {
		t.Fatalf("accepted job: %s", data)
	}
	return r.RequestID, lastCharge(t, v.e, "acme")
}

// checkVideoPrices creates jobs of three durations and resolutions and
// wants each charged its price, and the first recorded; it returns that
// first job's id.
func checkVideoPrices(v videoJobs) string {
	t := v.t
	t.Helper()
	// Defaults: 8 s at 480p = 8 × $0.05 = $0.40; 15 s at 1080p = $3.00; 3 s at 720p = $0.30.
	id, ch := v.create(`{"model":"modelc-imagine-video-1.5","prompt":"a calm sea"}`)
	if ch.Amount != -400_000_000 || ch.Usage.Seconds != 8 || ch.Usage.Resolution != "480p" {
		t.Fatalf("default charge %+v", ch)
	}
	if _, ch := v.create(`{"model":"modelc-imagine-video-1.5","prompt":"x","duration":15,"resolution":"1080p"}`); ch.Amount != -3_000_000_000 {
		t.Fatalf("1080p charge %+v", ch)
	}
	if _, ch := v.create(`{"model":"modelc-imagine-video-1.5","prompt":"x","duration":3,"resolution":"720p"}`); ch.Amount != -300_000_000 {
		t.Fatalf("720p charge %+v", ch)
	}
	j, err := v.e.store.Job(context.Background(), id)
	if err != nil || j.Account != "acme" || j.Amount != 400_000_000 || j.Line == "" {
		t.Fatalf("job record %+v %v", j, err)
	}
	return id
}

// checkVideoContent wants job id's content 404 until it is done, then mp4
// bytes, its status passed through, both read with key2 (another key of
// the account); another account, an unknown id or no key gets 404 or 401.
func checkVideoContent(v videoJobs, id, key2, stranger string) {
	t, e := v.t, v.e
	t.Helper()
	st, _, data := e.do("GET", "/v1/videos/"+id+"/content", v.key, nil)
	if st != 404 {
		t.Fatalf("content before done: %d %s", st, data)
	}
	errBody(t, data)
	var status string
	testwait.For(t, 10*time.Second, "the video job done", func() bool {
		st, _, data := e.do("GET", "/v1/videos/"+id, key2, nil)
		var doc map[string]any
		if st != 200 || json.Unmarshal(data, &doc) != nil || doc["request_id"] != id {
			t.Fatalf("status: %d %s", st, data)
		}
		status, _ = doc["status"].(string)
		return status == "done"
	})
	st, h, data := e.do("GET", "/v1/videos/"+id+"/content", key2, nil)
	if st != 200 || h.Get("Content-Type") != "video/mp4" || !bytes.Contains(data[:16], []byte("ftyp")) {
		t.Fatalf("content: %d %s %q", st, h.Get("Content-Type"), data[:16])
	}
	for _, p := range []string{"/v1/videos/" + id, "/v1/videos/" + id + "/content"} {
		if st, _, _ := e.do("GET", p, stranger, nil); st != 404 {
			t.Errorf("%s by another account: %d", p, st)
		}
	}
	if st, _, _ := e.do("GET", "/v1/videos/vid_nope", v.key, nil); st != 404 {
		t.Errorf("unknown job: %d", st)
	}
	if st, _, _ := e.do("GET", "/v1/videos/"+id, "", nil); st != 401 {
		t.Errorf("no key: %d", st)
	}
}

// waitAtProvider waits until the provider (the job line's sim, asked
// directly: a poll through the gateway would settle the job) says job id
// is in status.
func (v videoJobs) waitAtProvider(id, status string) {
	t, e := v.t, v.e
	t.Helper()
	j, err := e.store.Job(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	url := e.simURLs[j.Line] + "/v1/videos/" + id
	testwait.For(t, 10*time.Second, "job "+id+" "+status+" at the provider", func() bool {
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var doc struct {
			Status string `json:"status"`
		}
		return json.NewDecoder(resp.Body).Decode(&doc) == nil && doc.Status == status
	})
}

// checkFailedVideoRefundedOnce creates a job that fails and one that
// expires, polls the failed one 50 times at once and the others (done is
// job id) a few times, and wants exactly one refund, of the failed job,
// and the books to balance.
func checkFailedVideoRefundedOnce(v videoJobs, id string) {
	t, e := v.t, v.e
	t.Helper()
	failed, fch := v.create(`{"model":"modelc-imagine-video-1.5","prompt":"[fail] a storm","duration":5,"resolution":"720p"}`)
	expired, _ := v.create(`{"model":"modelc-imagine-video-1.5","prompt":"[expire] fog"}`)
	v.waitAtProvider(failed, sim.VideoFailed)
	v.waitAtProvider(expired, sim.VideoExpired)
	var wg sync.WaitGroup
	var oks atomic.Int64
	for i := 0; i < 50; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, _, data := e.do("GET", "/v1/videos/"+failed, v.key, nil)
			if st == 200 && strings.Contains(string(data), `"failed"`) {
				oks.Add(1)
			}
		}()
	}
	wg.Wait()
	if oks.Load() != 50 {
		t.Fatalf("%d of 50 polls saw the failed status", oks.Load())
	}
	for i := 0; i < 3; i++ {
		e.do("GET", "/v1/videos/"+expired, v.key, nil)
		e.do("GET", "/v1/videos/"+id, v.key, nil)
	}
	es, _ := e.charges("acme", 100)
	refunds := 0
	for _, x := range es {
		if x.Kind == store.KindRefund {
			refunds++
			if x.Amount != -fch.Amount || x.RequestID != fch.RequestID && !strings.Contains(x.Note+x.RequestID, failed) {
				t.Errorf("refund %+v for charge %+v", x, fch)
			}
		}
	}
	if refunds != 1 {
		t.Fatalf("%d refunds, want exactly 1 (failed job only; none for done or expired)", refunds)
	}
	sum, _ := journalSum(t, e, "acme")
	if b := e.balance("acme"); b.Balance != sum || b.Held != 0 {
		t.Fatalf("books: balance %s journal %s", b.Balance.Fixed(), sum.Fixed())
	}
}

func TestSystemOne(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	needModels(t, e, "sysmodel-1.13.0", "sysmodel-latest", "sysmodel-preview")
	e.account("acme", "20")
	key := e.key("acme", "standard")
	body := `{"model":"sysmodel-latest","state":"The customer asked for a refund twice and sounded upset.",
	  "questions":{"angry":{"type":"noul","instructions":"Is the customer angry?"},
	               "topic":{"type":"choice","options":["billing","shipping","other"]},
	               "urgency":{"type":"score","min":0,"max":10}}}`
	for _, path := range []string{"/v1/systemone", "/v1/system_one"} {
		st, _, data := e.do("POST", path, key, body)
		if st != 200 {
			t.Fatalf("%s: %d %s", path, st, data)
		}
		var r struct {
			Model   string                     `json:"model"`
			Answers map[string]json.RawMessage `json:"answers"`
			Usage   struct {
				InputTokens  int64 `json:"input_tokens"`
				OutputTokens int64 `json:"output_tokens"`
			} `json:"usage"`
		}
		if err := json.Unmarshal(data, &r); err != nil || len(r.Answers) != 3 || r.Usage.InputTokens == 0 {
			t.Fatalf("answer %s", data)
		}
		var noul struct {
			Type string   `json:"type"`
			Noul *float64 `json:"noul"`
		}
		if json.Unmarshal(r.Answers["angry"], &noul); noul.Type != "noul" || noul.Noul == nil {
			t.Fatalf("noul answer %s", r.Answers["angry"])
		}
		ch := lastCharge(t, e, "acme")
		// $0.04494 per 1M input tokens, output free, rounded up once.
		want := pricing.Nano((r.Usage.InputTokens*44_940_000 + 999_999) / 1_000_000)
		if ch.Amount != -want || ch.Usage.InputTokens != r.Usage.InputTokens {
			t.Fatalf("%s: charge %+v, want %d for %d tokens", path, ch, want, r.Usage.InputTokens)
		}
	}
	// 12,345 input tokens → ceil(12_345 × 0.04494) = ceil(554.7843) µ$ … = 554_785 nano.
	if got := pricing.Nano((12_345*44_940_000 + 999_999) / 1_000_000); got != 554_785 {
		t.Fatalf("hand check %d", got)
	}
	long := fmt.Sprintf(`{"model":"sysmodel-latest","state":%q,"questions":{"q":{"type":"noul"}}}`, strings.Repeat("w", 99_000))
	for _, tc := range []struct{ name, body, field string }{
		{"no state", `{"model":"sysmodel-latest","questions":{"q":{"type":"noul"}}}`, "state"},
		{"no questions", `{"model":"sysmodel-latest","state":"s"}`, "questions"},
		{"empty questions", `{"model":"sysmodel-latest","state":"s","questions":{}}`, "questions"},
		{"bad type", `{"model":"sysmodel-latest","state":"s","questions":{"q":{"type":"maybe"}}}`, "questions.q.type"},
		{"choice without options", `{"model":"sysmodel-latest","state":"s","questions":{"q":{"type":"choice"}}}`, "questions.q.options"},
		{"options not strings", `{"model":"sysmodel-latest","state":"s","questions":{"q":{"type":"choice","options":[1,2]}}}`, "questions.q.options"},
		{"score min above max", `{"model":"sysmodel-latest","state":"s","questions":{"q":{"type":"score","min":5,"max":1}}}`, "questions.q.min"},
		{"state too long", long, "state"},
	} {
		st, _, data := e.do("POST", "/v1/systemone", key, tc.body)
		if msg, _, _ := errBody(t, data); st != 400 || !strings.Contains(msg, tc.field) {
			t.Errorf("%s: %d %q", tc.name, st, msg)
		}
	}
	huge := fmt.Sprintf(`{"model":"sysmodel-latest","state":%q,"questions":{"q":{"type":"noul"}}}`, strings.Repeat("w", 1<<20))
	if st, _, data := e.do("POST", "/v1/systemone", key, huge); st != 400 || !strings.Contains(string(data), "limit") {
		t.Errorf("over 1 MiB: %d %s", st, data)
	}
	checkSystemOne422PassedThrough(t)
}

// checkSystemOne422PassedThrough: the provider's 422 passes through with
// its detail as written, in the error shape (docs/api.md#errors), and
// uncharged.
func checkSystemOne422PassedThrough(t *testing.T) {
	t.Helper()
	detail := `[{"loc":["body","state"],"msg":"state is too long: 40000 tokens, limit 32768","type":"value_error"}]`
	strict := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(422)
		fmt.Fprintf(w, `{"detail":%s}`, detail)
	}))
	defer strict.Close()
	e2 := newEnv(t, func(c *config.Config) { c.Lines[0].BaseURL = strict.URL })
	e2.account("acme", "1")
	st, _, data := e2.do("POST", "/v1/systemone", e2.key("acme", "standard"), `{"model":"sysmodel-latest","state":"s","questions":{"q":{"type":"noul"}}}`)
	msg, _, _ := errBody(t, data)
	if st != 422 || !strings.Contains(msg, detail) {
		t.Fatalf("422: %d %q", st, msg)
	}
	if b := e2.balance("acme"); b.Balance.String() != "1" || b.Held != 0 {
		t.Fatalf("a 422 was charged: %+v", b)
	}
}

// lostJobRecord wraps a store: its first PutJob writes the job, then
// reports the store unavailable, as a commit whose answer was lost with the
// connection; the next reports the store unavailable before writing.
type lostJobRecord struct {
	Store
	puts atomic.Int32
}

func (s *lostJobRecord) PutJob(ctx context.Context, j store.Job) error {
	switch s.puts.Add(1) {
	case 1:
		if err := s.Store.PutJob(ctx, j); err != nil {
			return err
		}
		return fmt.Errorf("put job: %w", store.ErrUnavailable)
	case 2:
		return fmt.Errorf("put job: %w", store.ErrUnavailable)
	}
	return s.Store.PutJob(ctx, j)
}

// TestVideoJobRecordedThroughAnOutage: a job is charged, then recorded; a
// record that meets the store unavailable is tried again until it lands
// (once: the lost commit's record stands), so a charged job can always be
// read and refunded.
func TestVideoJobRecordedThroughAnOutage(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	needModels(t, e, "modelc-imagine-video-1.5")
	e.account("acme", "20")
	key := e.key("acme", "standard")
	w := &lostJobRecord{}
	r := e.replica(func(s Store) Store { w.Store = s; return w })
	st, _, data := r.do("POST", "/v1/videos/generations", key, `{"model":"modelc-imagine-video-1.5","prompt":"a calm sea"}`)
	if st != 200 {
		t.Fatalf("create: %d %s", st, data)
	}
	var acc struct {
		RequestID string `json:"request_id"`
	}
	if err := json.Unmarshal(data, &acc); err != nil || acc.RequestID == "" {
		t.Fatalf("accepted job: %s", data)
	}
	if n := w.puts.Load(); n != 3 {
		t.Fatalf("PutJob tried %d times, want 3 (lost commit, outage, landed)", n)
	}
	j, err := e.store.Job(context.Background(), acc.RequestID)
	if err != nil || j.Account != "acme" || j.Amount != 400_000_000 {
		t.Fatalf("job record %+v %v", j, err)
	}
	if st, _, data := r.do("GET", "/v1/videos/"+acc.RequestID, key, ""); st != 200 {
		t.Fatalf("status of the charged job: %d %s", st, data)
	}
}
