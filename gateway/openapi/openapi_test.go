package openapi_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/modelrelay/modelrelay/gateway/openapi"
)

// schemaBase is the official schema that checks a whole OpenAPI 3.1
// document, its Schema Objects included.
const schemaBase = "https://spec.openapis.org/oas/3.1/schema-base/2022-10-07"

// officialSchema compiles the OpenAPI Initiative's 3.1 schemas from testdata,
// offline.
func officialSchema(t testing.TB) *jsonschema.Schema {
	t.Helper()
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	files, err := filepath.Glob(filepath.Join("testdata", "oas-3.1", "*.json"))
	if err != nil || len(files) != 4 {
		t.Fatalf("testdata/oas-3.1: want the 4 official schema files, found %v (%v)", files, err)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		id, _ := doc.(map[string]any)["$id"].(string)
		if id == "" {
			t.Fatalf("%s has no $id", f)
		}
		if err := c.AddResource(id, doc); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
	}
	sch, err := c.Compile(schemaBase)
	if err != nil {
		t.Fatalf("compile the official schema: %v", err)
	}
	return sch
}

func instance(t testing.TB, data []byte) any {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("the document is not JSON: %v", err)
	}
	return v
}

// TestDocumentIsValidOpenAPI31 validates the served document against the
// official OpenAPI 3.1 schema (schema-base: Schema Objects are checked
// against the OpenAPI dialect of JSON Schema 2020-12 too).
func TestDocumentIsValidOpenAPI31(t *testing.T) {
	t.Parallel()
	sch := officialSchema(t)
	if err := sch.Validate(instance(t, openapi.Document())); err != nil {
		var ve *jsonschema.ValidationError
		if errors.As(err, &ve) {
			t.Fatalf("openapi.json is not a valid OpenAPI 3.1 document:\n%v", ve.DetailedOutput())
		}
		t.Fatalf("openapi.json is not a valid OpenAPI 3.1 document: %v", err)
	}
}

// TestValidatorRejectsBrokenDocuments proves the validation above can fail:
// each case breaks the real document in one place.
func TestValidatorRejectsBrokenDocuments(t *testing.T) {
	t.Parallel()
	sch := officialSchema(t)
	tests := []struct {
		name   string
		break_ func(doc map[string]any)
	}{
		{"no info.version", func(d map[string]any) { delete(obj(d, "info"), "version") }},
		{"openapi 3.0.3", func(d map[string]any) { d["openapi"] = "3.0.3" }},
		{"unknown top-level key", func(d map[string]any) { d["paths2"] = map[string]any{} }},
		{"parameter in body", func(d map[string]any) {
			obj(d, "components", "parameters", "RequestIdPath")["in"] = "body"
		}},
		{"optional path parameter", func(d map[string]any) {
			obj(d, "components", "parameters", "RequestIdPath")["required"] = false
		}},
		{"schema type misspelt", func(d map[string]any) {
			obj(d, "components", "schemas", "Error")["type"] = "objet"
		}},
		{"minimum as a string", func(d map[string]any) {
			obj(d, "components", "schemas", "ImageGenerationRequest", "properties", "n")["minimum"] = "1"
		}},
		{"response without description", func(d map[string]any) {
			delete(obj(d, "components", "responses", "TooManyRequests"), "description")
		}},
		{"security scheme of unknown type", func(d map[string]any) {
			obj(d, "components", "securitySchemes", "bearerAuth")["type"] = "token"
		}},
		{"path not starting with a slash", func(d map[string]any) {
			p := obj(d, "paths")
			p["v1/models"] = p["/v1/models"]
			delete(p, "/v1/models")
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var doc map[string]any
			if err := json.Unmarshal(openapi.Document(), &doc); err != nil {
				t.Fatal(err)
			}
			tc.break_(doc)
			data, err := json.Marshal(doc)
			if err != nil {
				t.Fatal(err)
			}
			if err := sch.Validate(instance(t, data)); err == nil {
				t.Fatal("the broken document passed validation")
			}
		})
	}
}

// obj walks nested objects of a decoded document.
func obj(d map[string]any, path ...string) map[string]any {
	for _, k := range path {
		d = d[k].(map[string]any)
	}
	return d
}

func TestDocumentVersion(t *testing.T) {
	t.Parallel()
	var doc struct {
		OpenAPI string `json:"openapi"`
		Info    struct {
			Version string `json:"version"`
		} `json:"info"`
	}
	if err := json.Unmarshal(openapi.Document(), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.OpenAPI != "3.1.0" {
		t.Errorf("openapi = %q, want 3.1.0 (docs/api.md#versioning)", doc.OpenAPI)
	}
	if doc.Info.Version != "2026-09-19" {
		t.Errorf("info.version = %q, want 2026-09-19 (docs/api.md#versioning)", doc.Info.Version)
	}
	if openapi.Version != doc.Info.Version {
		t.Errorf("openapi.Version = %q, but the document says %q", openapi.Version, doc.Info.Version)
	}
}

func TestDocumentIsACopy(t *testing.T) {
	t.Parallel()
	a := openapi.Document()
	a[0] = 'x'
	if b := openapi.Document(); b[0] != '{' {
		t.Fatal("Document returned the embedded bytes, not a copy")
	}
}

// TestNoDuplicateKeys guards the hand-written JSON: encoding/json keeps the
// last of two equal keys silently, and so would most tools.
func TestNoDuplicateKeys(t *testing.T) {
	t.Parallel()
	dec := json.NewDecoder(bytes.NewReader(openapi.Document()))
	var walk func(path string) error
	walk = func(path string) error {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		switch tok {
		case json.Delim('{'):
			seen := map[string]bool{}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return err
				}
				k := kt.(string)
				if seen[k] {
					return fmt.Errorf("%s: key %q appears twice", path, k)
				}
				seen[k] = true
				if err := walk(path + "/" + k); err != nil {
					return err
				}
			}
			_, err = dec.Token()
			return err
		case json.Delim('['):
			for i := 0; dec.More(); i++ {
				if err := walk(path + "/" + strconv.Itoa(i)); err != nil {
					return err
				}
			}
			_, err = dec.Token()
			return err
		}
		return nil
	}
	if err := walk(""); err != nil {
		t.Fatal(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		t.Fatalf("trailing data after the document: %v", err)
	}
}

// TestReferencesResolve checks every local $ref names something in the
// document (the official schema only checks that a $ref is a string).
func TestReferencesResolve(t *testing.T) {
	t.Parallel()
	var doc any
	if err := json.Unmarshal(openapi.Document(), &doc); err != nil {
		t.Fatal(err)
	}
	n := 0
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch v := v.(type) {
		case map[string]any:
			if ref, ok := v["$ref"].(string); ok {
				n++
				if !strings.HasPrefix(ref, "#/") {
					t.Errorf("%s: $ref %q is not local", path, ref)
				} else if _, err := pointer(doc, ref[1:]); err != nil {
					t.Errorf("%s: $ref %q: %v", path, ref, err)
				}
			}
			for k, x := range v {
				walk(path+"/"+k, x)
			}
		case []any:
			for i, x := range v {
				walk(path+"/"+strconv.Itoa(i), x)
			}
		}
	}
	walk("", doc)
	if n < 50 {
		t.Fatalf("only %d references found; the walk is broken", n)
	}
}

// pointer resolves a JSON pointer ("/components/schemas/Error").
func pointer(doc any, p string) (any, error) {
	for _, tok := range strings.Split(p, "/")[1:] {
		tok = strings.NewReplacer("~1", "/", "~0", "~").Replace(tok)
		m, ok := doc.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%q is not inside an object", tok)
		}
		if doc, ok = m[tok]; !ok {
			return nil, fmt.Errorf("no %q", tok)
		}
	}
	return doc, nil
}

type operation struct {
	OperationID string                     `json:"operationId"`
	Security    *[]map[string][]string     `json:"security"`
	Parameters  []map[string]any           `json:"parameters"`
	Responses   map[string]json.RawMessage `json:"responses"`
}

func operations(t *testing.T) (map[string]operation, []map[string][]string) {
	t.Helper()
	var doc struct {
		Security []map[string][]string                 `json:"security"`
		Paths    map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(openapi.Document(), &doc); err != nil {
		t.Fatal(err)
	}
	ops := map[string]operation{}
	for path, item := range doc.Paths {
		for method, raw := range item {
			if method == "parameters" || method == "summary" || method == "description" {
				continue
			}
			var op operation
			if err := json.Unmarshal(raw, &op); err != nil {
				t.Fatalf("%s %s: %v", method, path, err)
			}
			ops[strings.ToUpper(method)+" "+path] = op
		}
	}
	return ops, doc.Security
}

// TestEndpointsAndStatuses checks the document against docs/api.md#endpoints and #errors
// and 5: every endpoint is there, with the error statuses its section lists,
// and the right security.
func TestEndpointsAndStatuses(t *testing.T) {
	t.Parallel()
	relay := []string{"200", "400", "401", "402", "403", "404", "429", "503", "default"}
	typed := []string{"200", "400", "401", "402", "403", "404", "422", "429", "503", "default"}
	video := []string{"200", "401", "403", "404", "default"} // 403: outside the key's allow-list
	bearer := []map[string][]string{{"bearerAuth": {}}}
	messages := []map[string][]string{{"bearerAuth": {}}, {"apiKeyAuth": {}}}
	none := []map[string][]string{}
	admin := []map[string][]string{{"adminToken": {}}}
	want := []struct {
		op       string
		statuses []string
		security []map[string][]string
	}{
		{"POST /v1/chat/completions", relay, bearer},
		{"POST /v1/responses", relay, bearer},
		{"POST /v1/responses/compact", relay, bearer},
		{"GET /v1/responses", []string{"405", "426", "default"}, none},
		{"POST /v1/messages", relay, messages},
		{"POST /v1/messages/count_tokens", []string{"200", "400", "401", "403", "404", "429", "503", "default"}, messages},
		{"POST /v1/images/generations", relay, bearer},
		{"POST /v1/images/edits", relay, bearer},
		{"POST /v1/videos/generations", relay, bearer},
		{"GET /v1/videos/{request_id}", video, bearer},
		{"GET /v1/videos/{request_id}/content", video, bearer},
		{"POST /v1/systemone", typed, bearer},
		{"POST /v1/system_one", typed, bearer},
		{"GET /v1/models", []string{"200", "400", "401", "403", "default"}, bearer},
		// The key holder's reads; 403: outside the key's allow-list.
		{"GET /v1/key", []string{"200", "401", "403", "429", "503", "default"}, bearer},
		{"GET /v1/generations/{request_id}", []string{"200", "401", "403", "404", "429", "503", "default"}, bearer},
		{"GET /v1/dashboard/billing/subscription", []string{"200", "401", "403", "429", "503", "default"}, bearer},
		{"GET /v1/dashboard/billing/usage", []string{"200", "400", "401", "403", "429", "503", "default"}, bearer},
		{"GET /api/pricing", []string{"200", "304", "429", "default"}, none},
		{"GET /openapi.json", []string{"200", "304", "default"}, none},
		{"GET /pricing", []string{"200", "304", "default"}, none},
		// The admin API's one documented operation.
		{"POST /admin/accounts/{account}/login", []string{"201", "400", "401", "404", "409", "default"}, admin},
	}
	ops, global := operations(t)
	if len(ops) != len(want) {
		var got []string
		for k := range ops {
			got = append(got, k)
		}
		slices.Sort(got)
		t.Errorf("the document has %d operations, want %d: %q", len(ops), len(want), got)
	}
	ids := map[string]string{}
	for _, w := range want {
		t.Run(w.op, func(t *testing.T) {
			op, ok := ops[w.op]
			if !ok {
				t.Fatal("missing from the document")
			}
			if op.OperationID == "" {
				t.Error("no operationId")
			} else if other, dup := ids[op.OperationID]; dup {
				t.Errorf("operationId %q is also used by %s", op.OperationID, other)
			}
			ids[op.OperationID] = w.op
			var got []string
			for s := range op.Responses {
				got = append(got, s)
			}
			slices.Sort(got)
			if !slices.Equal(got, w.statuses) {
				t.Errorf("responses %q, want %q", got, w.statuses)
			}
			sec := global
			if op.Security != nil {
				sec = *op.Security
			}
			if fmt.Sprint(sec) != fmt.Sprint(w.security) {
				t.Errorf("security %v, want %v", sec, w.security)
			}
			for code, raw := range op.Responses {
				if code == "200" || code == "201" || code == "304" {
					continue
				}
				var r struct {
					Ref string `json:"$ref"`
				}
				if err := json.Unmarshal(raw, &r); err != nil || !strings.HasPrefix(r.Ref, "#/components/responses/") {
					t.Errorf("response %s is not one of the shared error responses: %s", code, raw)
				}
				if code == "429" && r.Ref != "#/components/responses/TooManyRequests" {
					t.Errorf("429 must carry Retry-After (TooManyRequests), not %s", r.Ref)
				}
			}
		})
	}
}
