package pricing

import (
	"encoding/json"
	"os"
	"reflect"
	"testing"
)

func FuzzParseUSD(f *testing.F) {
	for _, s := range []string{"3", "3.00", "0.04494", "0.000000001", "-1", "1e3", "", " 1", "1.2345678901",
		"9223372036.854775807", "9223372036.854775808", "-9223372036.854775808", "0.1000000000000", ".5", "5."} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseUSD(s)
		signed, serr := ParseSignedUSD(s)
		if err == nil {
			if n < 0 {
				t.Fatalf("ParseUSD(%q) = %d, negative", s, n)
			}
			if serr != nil || signed != n {
				t.Fatalf("ParseSignedUSD(%q) = %d, %v; ParseUSD gave %d", s, signed, serr, n)
			}
		}
		if serr != nil {
			return
		}
		for _, text := range []string{signed.String(), signed.Fixed()} {
			back, err := ParseSignedUSD(text)
			if err != nil || back != signed {
				t.Fatalf("%q → %d → %q → %d, %v", s, signed, text, back, err)
			}
		}
		var j Nano
		b, _ := json.Marshal(signed)
		if err := json.Unmarshal(b, &j); err != nil || j != signed {
			t.Fatalf("JSON round trip of %d via %s: %d, %v", signed, b, j, err)
		}
	})
}

func FuzzParseModels(f *testing.F) {
	if data, err := os.ReadFile("testdata/models.json"); err == nil {
		f.Add(data)
	}
	f.Add(models(model("x", `{"unit": "per_million_tokens", "input": 1.5, "output": "2", "long_context": {"min_input_tokens": 5, "input": "3", "output": 4}}`)))
	f.Add(models(model("x", `{"unit": "per_image", "sizes": {"1K": 0.03}}`)))
	f.Add([]byte(`{"models": [{"id": "x", "id": "y"}]}`))
	f.Add([]byte(`{"models": null}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		ms, err := ParseModels(data)
		if err != nil {
			return
		}
		for _, m := range ms {
			if err := m.Validate(); err != nil {
				t.Fatalf("ParseModels accepted %s, which Validate rejects: %v", m.ID, err)
			}
			prices := []Price{}
			for _, p := range m.Routes {
				prices = append(prices, p)
			}
			if m.Reference != nil {
				prices = append(prices, *m.Reference)
			}
			for _, p := range prices {
				b, err := json.Marshal(p)
				if err != nil {
					t.Fatal(err)
				}
				var back Price
				if err := json.Unmarshal(b, &back); err != nil || !reflect.DeepEqual(back, p) {
					t.Fatalf("price %+v → %s → %+v, %v", p, b, back, err)
				}
			}
		}
	})
}
