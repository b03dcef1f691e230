package sim

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

type anthUsage struct {
	InputTokens              int64 `json:"input_tokens"`
	OutputTokens             int64 `json:"output_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
	CacheCreation            struct {
		Ephemeral5m int64 `json:"ephemeral_5m_input_tokens"`
		Ephemeral1h int64 `json:"ephemeral_1h_input_tokens"`
	} `json:"cache_creation"`
}

type anthMessage struct {
	ID      string `json:"id"`
	Type    string `json:"type"`
	Role    string `json:"role"`
	Model   string `json:"model"`
	Content []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
	StopReason   *string    `json:"stop_reason"`
	StopSequence *string    `json:"stop_sequence"`
	Usage        *anthUsage `json:"usage"`
}

func TestMessagesJSON(t *testing.T) {
	t.Parallel()
	_, ts := newTestServer(t, Options{})
	cases := []struct {
		name   string
		body   string
		hdr    map[string]string
		input  int64
		output int64
		stop   string
	}{
		{
			name:   "string system and content",
			body:   `{"model":"modela-sonnet-5-5","max_tokens":100,"system":"you are a sim","messages":[{"role":"user","content":"hi canary-77"}]}`,
			hdr:    anthropicHdr,
			input:  4 + 4 + 3,
			output: ReplyWords,
			stop:   "end_turn",
		},
		{
			name:   "blocks, neutral version header, capped",
			body:   `{"model":"modela-opus-5-5","max_tokens":4,"messages":[{"role":"user","content":[{"type":"text","text":"abcdefgh"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AAAA"}}]},{"role":"assistant","content":"ok"},{"role":"user","content":"go"}]}`,
			hdr:    map[string]string{"vendorx-version": "2023-06-01"},
			input:  (4 + 2 + PartTokens) + (4 + 1) + (4 + 1),
			output: 4,
			stop:   "max_tokens",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, _, b := call(t, ts, http.MethodPost, "/v1/messages", tc.body, tc.hdr)
			if status != http.StatusOK {
				t.Fatalf("status %d: %s", status, b)
			}
			m := decode[anthMessage](t, b)
			if !strings.HasPrefix(m.ID, "msg_") || m.Type != "message" || m.Role != "assistant" || m.Model == "" {
				t.Errorf("envelope %+v", m)
			}
			if len(m.Content) != 1 || m.Content[0].Type != "text" {
				t.Fatalf("content %+v", m.Content)
			}
			if m.StopReason == nil || *m.StopReason != tc.stop || m.StopSequence != nil {
				t.Errorf("stop_reason %v stop_sequence %v, want %q", m.StopReason, m.StopSequence, tc.stop)
			}
			u := m.Usage
			if u == nil || u.InputTokens != tc.input || u.OutputTokens != tc.output || u.CacheReadInputTokens != 0 || u.CacheCreationInputTokens != 0 {
				t.Fatalf("usage %+v, want input %d output %d", u, tc.input, tc.output)
			}
			if n := int64(len(strings.Fields(m.Content[0].Text))); n != u.OutputTokens {
				t.Errorf("text has %d words, usage %d", n, u.OutputTokens)
			}
			want, err := MessagesUsage([]byte(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			if want.Prompt != u.InputTokens || want.Completion != u.OutputTokens || want.Capped != (tc.stop == "max_tokens") {
				t.Errorf("MessagesUsage %+v disagrees with %+v", want, u)
			}
		})
	}
}

func TestMessagesErrors(t *testing.T) {
	t.Parallel()
	_, ts := newTestServer(t, Options{})
	ok := `{"model":"modela-fable-5-1","max_tokens":10,"messages":[{"role":"user","content":"x"}]}`
	cases := []struct {
		name   string
		body   string
		hdr    map[string]string
		status int
		typ    string
		msg    string
	}{
		{"missing version header", ok, nil, 400, "invalid_request_error", "anthropic-version"},
		{"missing max_tokens", `{"model":"modela-fable-5-1","messages":[{"role":"user","content":"x"}]}`, anthropicHdr, 400, "invalid_request_error", "max_tokens"},
		{"zero max_tokens", `{"model":"modela-fable-5-1","max_tokens":0,"messages":[{"role":"user","content":"x"}]}`, anthropicHdr, 400, "invalid_request_error", "max_tokens"},
		{"non-modela model", `{"model":"modelb-6-astra","max_tokens":10,"messages":[{"role":"user","content":"x"}]}`, anthropicHdr, 404, "not_found_error", "modelb-6-astra"},
		{"unknown model", `{"model":"modela-x","max_tokens":10,"messages":[{"role":"user","content":"x"}]}`, anthropicHdr, 404, "not_found_error", "does not exist"},
		{"bad role", `{"model":"modela-fable-5-1","max_tokens":10,"messages":[{"role":"robot","content":"x"}]}`, anthropicHdr, 400, "invalid_request_error", "messages.0.role"},
		{"bad cache_control", `{"model":"modela-fable-5-1","max_tokens":10,"messages":[{"role":"user","content":[{"type":"text","text":"x","cache_control":{"type":"ephemeral","ttl":"2h"}}]}]}`, anthropicHdr, 400, "invalid_request_error", "ttl"},
		{"bad json", `{"model"`, anthropicHdr, 400, "invalid_request_error", "JSON"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, _, b := call(t, ts, http.MethodPost, "/v1/messages", tc.body, tc.hdr)
			if status != tc.status {
				t.Fatalf("status %d, want %d: %s", status, tc.status, b)
			}
			e := decode[anthErrBody](t, b)
			if e.Type != "error" || e.Error.Type != tc.typ || !strings.Contains(e.Error.Message, tc.msg) {
				t.Errorf("error body %s, want type %q message containing %q", b, tc.typ, tc.msg)
			}
		})
	}
}

func TestMessagesStream(t *testing.T) {
	t.Parallel()
	_, ts := newTestServer(t, Options{Chunks: 3})
	body := `{"model":"modela-fable-5-1","max_tokens":50,"stream":true,"system":[{"type":"text","text":"` +
		strings.Repeat("s", 40) + `","cache_control":{"type":"ephemeral","ttl":"1h"}}],"messages":[{"role":"user","content":"stream canary-8"}]}`
	want, err := MessagesUsage([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	evs, err := postStream(t, ts, "/v1/messages", body, anthropicHdr)
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"message_start", "content_block_start", "ping", "content_block_delta", "content_block_delta",
		"content_block_delta", "content_block_stop", "message_delta", "message_stop"}
	if len(evs) != len(names) {
		t.Fatalf("%d events, want %d: %+v", len(evs), len(names), evs)
	}
	var text strings.Builder
	for i, ev := range evs {
		if ev.name != names[i] {
			t.Fatalf("event %d is %q, want %q", i, ev.name, names[i])
		}
		e := decode[struct {
			Type    string       `json:"type"`
			Index   *int         `json:"index"`
			Message *anthMessage `json:"message"`
			Delta   struct {
				Type       string  `json:"type"`
				Text       string  `json:"text"`
				StopReason *string `json:"stop_reason"`
			} `json:"delta"`
			Usage *anthUsage `json:"usage"`
		}](t, []byte(ev.data))
		if e.Type != ev.name {
			t.Errorf("event %d type %q", i, e.Type)
		}
		switch ev.name {
		case "message_start":
			m := e.Message
			if m == nil || m.StopReason != nil || len(m.Content) != 0 || m.Usage == nil {
				t.Fatalf("message_start %s", ev.data)
			}
			u := m.Usage
			if u.InputTokens != want.Prompt || u.CacheCreation.Ephemeral1h != want.CacheWrite1h || want.CacheWrite1h != 10 ||
				u.CacheCreationInputTokens != 10 || u.CacheReadInputTokens != 0 || u.OutputTokens != 1 {
				t.Errorf("message_start usage %+v, want %+v", u, want)
			}
		case "content_block_delta":
			if e.Delta.Type != "text_delta" || e.Index == nil || *e.Index != 0 {
				t.Errorf("delta %s", ev.data)
			}
			text.WriteString(e.Delta.Text)
		case "message_delta":
			if e.Delta.StopReason == nil || *e.Delta.StopReason != "end_turn" || e.Usage == nil || e.Usage.OutputTokens != want.Completion {
				t.Errorf("message_delta %s, want output %d", ev.data, want.Completion)
			}
		}
	}
	wantText, _ := ReplyText("modela-fable-5-1", "stream canary-8", 50)
	if text.String() != wantText {
		t.Errorf("text %q, want %q", text.String(), wantText)
	}
}

// cacheReq builds a messages body with a 100-token system block (with a
// breakpoint of ttl sysTTL; "" for none) and the given user turns, each
// "text" or "text|ttl" for a breakpoint on that turn.
func cacheReq(model, sysTTL string, turns ...string) string {
	cc := func(ttl string) string {
		switch ttl {
		case "":
			return ""
		case "5m":
			return `,"cache_control":{"type":"ephemeral"}`
		}
		return `,"cache_control":{"type":"ephemeral","ttl":"` + ttl + `"}`
	}
	var msgs []string
	for i, turn := range turns {
		if i > 0 {
			msgs = append(msgs, `{"role":"assistant","content":"ok"}`)
		}
		text, ttl, _ := strings.Cut(turn, "|")
		msgs = append(msgs, fmt.Sprintf(`{"role":"user","content":[{"type":"text","text":%q%s}]}`, text, cc(ttl)))
	}
	return `{"model":"` + model + `","max_tokens":20,"system":[{"type":"text","text":"` + strings.Repeat("y", 400) + `"` +
		cc(sysTTL) + `}],"messages":[` + strings.Join(msgs, ",") + `]}`
}

func TestMessagesCaching(t *testing.T) {
	t.Parallel()
	_, ts, clk := newClockServer(t, Options{})
	type want struct{ input, read, w5m, w1h int64 }
	// Token layout: system 100; each user turn 4 + Tokens(turn); assistant "ok" 4 + 1.
	steps := []struct {
		name    string
		body    string
		advance time.Duration
		want    want
	}{
		{"first sight writes the system prefix", cacheReq("modela-fable-5-1", "5m", "q one"), 0, want{input: 4 + 2, w5m: 100}},
		{"repeat reads it", cacheReq("modela-fable-5-1", "5m", "q one"), 0, want{input: 6, read: 100}},
		{"other model does not share the cache", cacheReq("modela-opus-5-5", "5m", "q one"), 0, want{input: 6, w5m: 100}},
		{"1h breakpoint after a cached one writes the rest", cacheReq("modela-fable-5-1", "5m", "q one|1h"), 0, want{read: 100, w1h: 6}},
		{"both cached: all read", cacheReq("modela-fable-5-1", "5m", "q one|1h"), 0, want{read: 106}},
		{"next turn finds the earlier breakpoint by lookback", cacheReq("modela-fable-5-1", "", "q one", "q two|5m"), 0, want{read: 106, w5m: 5 + 6}},
		{"4 minutes later the 5m entry is still there", cacheReq("modela-fable-5-1", "5m", "q one"), 4 * time.Minute, want{input: 6, read: 100}},
		{"the read refreshed it", cacheReq("modela-fable-5-1", "5m", "q one"), 4 * time.Minute, want{input: 6, read: 100}},
		{"the other model's entry, idle 14 minutes, expired", cacheReq("modela-opus-5-5", "5m", "q one"), 6 * time.Minute, want{input: 6, w5m: 100}},
		{"the 1h entry outlives it", cacheReq("modela-fable-5-1", "", "q one|1h"), 0, want{read: 106}},
	}
	for _, st := range steps {
		clk.advance(st.advance)
		status, _, b := call(t, ts, http.MethodPost, "/v1/messages", st.body, anthropicHdr)
		if status != http.StatusOK {
			t.Fatalf("%s: status %d: %s", st.name, status, b)
		}
		u := decode[anthMessage](t, b).Usage
		got := want{u.InputTokens, u.CacheReadInputTokens, u.CacheCreation.Ephemeral5m, u.CacheCreation.Ephemeral1h}
		if got != st.want || u.CacheCreationInputTokens != got.w5m+got.w1h {
			t.Errorf("%s: usage %+v, want %+v", st.name, u, st.want)
		}
	}
	// The stateless helper reports the first-sight split.
	c, err := MessagesUsage([]byte(cacheReq("modela-fable-5-1", "1h", "q one|5m")))
	if err != nil {
		t.Fatal(err)
	}
	if c.Prompt != 0 || c.Cached != 0 || c.CacheWrite1h != 100 || c.CacheWrite != 6 {
		t.Errorf("MessagesUsage %+v", c)
	}
}

func TestPromptCacheBounded(t *testing.T) {
	t.Parallel()
	var c promptCache
	for i := uint64(0); i < cacheShards*cacheShardMax*2; i++ {
		c.put(i, ttl5m, 0)
	}
	total := 0
	for i := range c.shards {
		total += len(c.shards[i].m)
	}
	if total > cacheShards*cacheShardMax {
		t.Fatalf("cache holds %d entries, bound %d", total, cacheShards*cacheShardMax)
	}
	if !c.hit(cacheShards*cacheShardMax*2-1, 1) {
		t.Errorf("the newest entry is missing")
	}
	if c.hit(cacheShards*cacheShardMax*2-1, ttl5m+10) {
		t.Errorf("an expired entry was a hit")
	}
}
