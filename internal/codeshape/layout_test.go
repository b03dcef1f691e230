package codeshape

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// maxFileLines is the most lines a non-test Go file may have: past it, a
// file holds more than one concern and should be split by concern.
const maxFileLines = 600

// TestFileLength fails naming every non-test Go file over maxFileLines.
func TestFileLength(t *testing.T) {
	root := moduleRoot(t)
	files, err := goFiles(root, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range files {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if n := bytes.Count(data, []byte("\n")); n > maxFileLines {
			rel, _ := filepath.Rel(root, path)
			t.Errorf("%s is %d lines, over %d: split it by concern", rel, n, maxFileLines)
		}
	}
}

// goFiles are the Go files of the module at root (skipDir's directories
// left out), with or without the tests.
func goFiles(root string, tests bool) ([]string, error) {
	var files []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && path != root && skipDir(path, d.Name()):
			return filepath.SkipDir
		case !d.IsDir() && strings.HasSuffix(path, ".go") && (tests || !strings.HasSuffix(path, "_test.go")):
			files = append(files, path)
		}
		return nil
	})
	return files, err
}

// maxMethods is the most methods the gateway's top types may have: past
// it, a type carries more than one concern and a part should become a
// package or a type of its own.
const maxMethods = 30

// topTypes are the gateway's top types: the HTTP front, the relayed
// call's pipeline, and the parts split out of them.
var topTypes = map[string][]string{
	"gateway":         {"Gateway", "relay"},
	"gateway/billing": {"Ledger", "Ticket"},
	"gateway/lines":   {"Set", "Line"},
	"gateway/admin":   {"API"},
	"gateway/holder":  {"API"},
	"gateway/listen":  {"Bounds"},
}

// TestTopTypesStaySmall fails naming each top type with over maxMethods
// methods.
func TestTopTypesStaySmall(t *testing.T) {
	root := moduleRoot(t)
	decls, err := declarations(root)
	if err != nil {
		t.Fatal(err)
	}
	for dir, types := range topTypes {
		for _, typ := range types {
			n := 0
			for file, names := range decls {
				if file == "" || filepath.Dir(file) != dir {
					continue
				}
				for name := range names {
					if strings.HasPrefix(name, typ+".") && strings.Count(name, ".") == 1 {
						n++
					}
				}
			}
			switch {
			case n == 0:
				t.Errorf("%s.%s has no methods: is it still a top type?", dir, typ)
			case n > maxMethods:
				t.Errorf("%s.%s has %d methods, over %d: give a part of it a type or a package of its own", dir, typ, n, maxMethods)
			}
		}
	}
}

// TestOnlyTheBinaryImportsTheGateway fails naming each Go file outside
// cmd/relay that imports package gateway: its parts import what is below
// them (config, apierr, the store), so the gateway can use them all.
func TestOnlyTheBinaryImportsTheGateway(t *testing.T) {
	root := moduleRoot(t)
	const top = "github.com/modelrelay/modelrelay/gateway"
	files, err := goFiles(root, true)
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, path := range files {
		rel, _ := filepath.Rel(root, path)
		if strings.HasPrefix(filepath.ToSlash(rel), "cmd/relay/") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			if imp.Path.Value == strconv.Quote(top) {
				t.Errorf("%s imports %s: only cmd/relay may", rel, top)
			}
		}
	}
}

// wireMayImport are the module's packages wire may import besides the
// standard library: it stays a pure reading of wire formats, without money,
// the store or the gateway (wire/doc.go).
var wireMayImport = map[string]bool{
	"github.com/modelrelay/modelrelay/internal/jsonscan": true,
	"github.com/modelrelay/modelrelay/internal/clip":     true,
	"github.com/modelrelay/modelrelay/sdk/abi":           true,
	"github.com/modelrelay/modelrelay/wire/units":        true,
}

// TestWireIsPure fails naming each import of wire's non-test files that is
// neither the standard library nor in wireMayImport.
func TestWireIsPure(t *testing.T) {
	root := moduleRoot(t)
	files, err := goFiles(filepath.Join(root, "wire"), false)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no Go files in wire/")
	}
	fset := token.NewFileSet()
	for _, path := range files {
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			first, _, _ := strings.Cut(p, "/")
			if strings.Contains(first, ".") && !wireMayImport[p] {
				rel, _ := filepath.Rel(root, path)
				t.Errorf("%s imports %s: wire imports the standard library and %v only", rel, p, slices.Sorted(maps.Keys(wireMayImport)))
			}
		}
	}
}

// sdkExports are the names package sdk gives plugin authors: what the
// first-party plugins and the example use. A new one is a decision, made
// here; the rest of the guest's machinery is sdk/internal/guest's.
var sdkExports = []string{
	"Charge", "CheckedList", "Forbidden", "Hold", "Internal", "Invalid",
	"Plugin", "PriceList", "QuoteValue", "Register", "TokenPlugin", "Unprocessable",
}

// TestSDKExportsWhatAuthorsUse fails naming each top-level name package sdk
// exports beyond sdkExports, and each of those it no longer exports.
func TestSDKExportsWhatAuthorsUse(t *testing.T) {
	root := moduleRoot(t)
	files, err := goFiles(filepath.Join(root, "sdk"), false)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	fset := token.NewFileSet()
	for _, path := range files {
		if filepath.Dir(path) != filepath.Join(root, "sdk") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv != nil {
				continue // a method: its type is what is exported
			}
			for _, n := range declaredNames(&ast.File{Decls: []ast.Decl{d}}) {
				if !strings.Contains(n, ".") && token.IsExported(n) {
					got[n] = true
				}
			}
		}
	}
	for _, n := range sdkExports {
		if !got[n] {
			t.Errorf("sdk no longer exports %s", n)
		}
		delete(got, n)
	}
	for n := range got {
		t.Errorf("sdk exports %s: keep it unexported, in sdk/internal/guest, or add it to sdkExports", n)
	}
}

// TestGatewayDoesNotImportTheSDK fails naming each non-test file under
// gateway/ that imports the plugin-side sdk: the host reads the ABI
// (sdk/abi) and converts with package plugins.
func TestGatewayDoesNotImportTheSDK(t *testing.T) {
	root := moduleRoot(t)
	files, err := goFiles(filepath.Join(root, "gateway"), false)
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, path := range files {
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			if imp.Path.Value == `"github.com/modelrelay/modelrelay/sdk"` {
				rel, _ := filepath.Rel(root, path)
				t.Errorf("%s imports the plugin-side sdk", rel)
			}
		}
	}
}
