package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files of testdata/usage")

// usageGolden is what a golden file records of one fixture: the usage read
// out of it and, for a stream, how many events it had and the text they
// delivered (the estimate's input when a stream ends without usage).
type usageGolden struct {
	OK        bool   `json:"ok"`
	Usage     Usage  `json:"usage"`
	Error     string `json:"error,omitempty"`
	Events    int    `json:"events,omitempty"`
	TextBytes int    `json:"text_bytes,omitempty"`
	Job       string `json:"job,omitempty"` // a video job's id
}

// goldenFormats names the reader of each fixture of testdata/usage: an
// answer read whole, or a stream read event by event with its Meter and
// text reader, as the gateway reads them.
var goldenFormats = map[string]struct {
	usage func([]byte) (Usage, bool, error)
	meter func() Meter
	text  func([]byte) int
}{
	"chat.json":            {usage: ChatUsage},
	"chat_stream.sse":      {meter: NewChatMeter, text: ChatText},
	"responses.json":       {usage: ResponsesUsage},
	"responses_stream.sse": {meter: NewResponsesMeter, text: ResponsesText},
	"messages.json":        {usage: MessagesUsage},
	"messages_stream.sse":  {meter: NewMessagesMeter, text: MessagesText},
	"images.json":          {usage: ImagesUsage},
	"images_stream.sse":    {meter: NewImagesMeter},
	"systemone.json":       {usage: SystemOneUsage},
	"video.json":           {}, // with video_request.json: videoGolden
	"video_request.json":   {},
	"chat_stream.stripped": {}, // a golden of its own: TestGoldenChatStrip
	"README.md":            {},
}

// TestGoldenUsage reads the usage of one real-shaped answer per wire format
// (testdata/usage/NAME.json or NAME.sse) and compares it with NAME.golden.
// go test -run TestGoldenUsage -update rewrites the goldens; read the diff.
func TestGoldenUsage(t *testing.T) {
	files, err := filepath.Glob("testdata/usage/*")
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range files {
		name := filepath.Base(path)
		if strings.HasSuffix(name, ".golden") {
			continue
		}
		f, known := goldenFormats[name]
		if !known {
			t.Errorf("%s: no reader for this fixture in goldenFormats", name)
			continue
		}
		if f.usage == nil && f.meter == nil && name != "video.json" {
			continue
		}
		t.Run(name, func(t *testing.T) {
			body, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			var g usageGolden
			switch {
			case name == "video.json":
				g = videoGolden(t, body)
			case f.meter != nil:
				g = streamGolden(t, body, f.meter(), f.text)
			default:
				u, ok, err := f.usage(body)
				g = usageGolden{OK: ok, Usage: u}
				if err != nil {
					g.Error = err.Error()
				}
			}
			got, err := json.MarshalIndent(g, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			checkGolden(t, strings.TrimSuffix(path, filepath.Ext(path))+".golden", append(got, '\n'))
		})
	}
}

// streamGolden reads body as the gateway relays a stream: event by event
// (EventReader, ParseEvent), each event with a name or data fed to m.
func streamGolden(t *testing.T, body []byte, m Meter, text func([]byte) int) usageGolden {
	t.Helper()
	var g usageGolden
	rd := NewEventReader(bytes.NewReader(body))
	for {
		ev, err := rd.Next()
		if err != nil {
			if !errors.Is(err, io.EOF) || len(bytes.TrimSpace(ev)) > 0 {
				t.Fatalf("the stream does not end with a whole event: %v, %q", err, ev)
			}
			break
		}
		name, data := ParseEvent(ev)
		if data == nil && len(name) == 0 {
			continue
		}
		g.Events++
		if err := m.Observe(string(name), data); err != nil && g.Error == "" {
			g.Error = err.Error()
		}
		if data != nil && text != nil {
			g.TextBytes += text(data)
		}
	}
	g.Usage, g.OK = m.Usage()
	return g
}

// videoGolden is the job id of an accepted video job and the usage its
// request (video_request.json) is charged for.
func videoGolden(t *testing.T, answer []byte) usageGolden {
	t.Helper()
	req, err := os.ReadFile("testdata/usage/video_request.json")
	if err != nil {
		t.Fatal(err)
	}
	s, err := DecodeVideo(req)
	if err != nil {
		t.Fatal(err)
	}
	g := usageGolden{Job: VideoJobID(answer), Usage: VideoUsage(s.Params)}
	g.OK = g.Job != ""
	return g
}

// TestGoldenChatStrip: the chat stream as a client that did not ask for
// usage sees it (StripChatUsage on every event): no usage chunk, no
// "usage":null member, every other byte as the provider sent it.
func TestGoldenChatStrip(t *testing.T) {
	body, err := os.ReadFile("testdata/usage/chat_stream.sse")
	if err != nil {
		t.Fatal(err)
	}
	var out []byte
	rd := NewEventReader(bytes.NewReader(body))
	for {
		ev, err := rd.Next()
		if err != nil {
			break
		}
		if _, data := ParseEvent(ev); data != nil {
			var drop bool
			if ev, drop = StripChatUsage(ev, data); drop {
				continue
			}
		}
		out = append(out, ev...)
	}
	if bytes.Contains(out, []byte(`"usage":null`)) || bytes.Contains(out, []byte(`"choices":[]`)) {
		t.Errorf("usage left in the stripped stream:\n%s", out)
	}
	checkGolden(t, "testdata/usage/chat_stream.stripped", out)
}

// checkGolden compares got with the file path, or writes it with -update.
func checkGolden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -run %s -update writes it)", err, t.Name())
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs:\n got: %s\nwant: %s", path, got, want)
	}
}
