package codeshape

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// callMapTitle is the README section that names the function and file of
// each step of a relayed call.
const callMapTitle = "## A relayed call, step by step"

// TestReadmeCallMapIsTrue fails naming each file, package or function the
// README's map of a call names that does not exist, and each function
// written as "`Name` (`file.go`)" that is not declared in that file: the
// map is the newcomer's way in, and it must not drift from the code.
func TestReadmeCallMapIsTrue(t *testing.T) {
	root := moduleRoot(t)
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	section, ok := markdownSection(string(readme), callMapTitle)
	if !ok {
		t.Fatalf("README.md has no section %q", callMapTitle)
	}
	decls, err := declarations(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range callMapProblems(root, section, decls) {
		t.Error(p)
	}
}

// TestCallMapProblemsFound checks the check against a module of one file
// and a map with one name of each kind right and wrong, so that a check
// that finds nothing cannot pass for a true map.
func TestCallMapProblemsFound(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "gateway"), 0o755); err != nil {
		t.Fatal(err)
	}
	src := "package gateway\n\ntype Gateway struct{}\n\nfunc (g *Gateway) handle() {}\n\nfunc relayHandler() {}\n\ntype Ledger interface{ Hold() }\n"
	if err := os.WriteFile(filepath.Join(dir, "gateway", "gateway.go"), []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	decls, err := declarations(dir)
	if err != nil {
		t.Fatal(err)
	}
	good := "`Gateway.handle` (`gateway.go`) and `relayHandler` (`gateway/gateway.go`); `gateway.Ledger.Hold`; `limits.overload_delay`; `Authorization`; `402`."
	if p := callMapProblems(dir, good, decls); len(p) != 0 {
		t.Fatalf("a true map: %q", p)
	}
	bad := "`Gateway.admit` (`gateway.go`), `relayHandler` (`relay.go`), `Gateway.handle` (`gateway/other.go`), `store.Ledger.Hold`."
	if p := callMapProblems(dir, bad, decls); len(p) != 4 {
		t.Fatalf("a map with four wrong names found %d: %q", len(p), p)
	}
}

// markdownSection is the text under the heading title, to the next
// heading of the same or a higher level.
func markdownSection(doc, title string) (string, bool) {
	_, rest, ok := strings.Cut(doc, "\n"+title+"\n")
	if !ok {
		return "", false
	}
	level := strings.IndexByte(title, ' ')
	lines := strings.SplitAfter(rest, "\n")
	for i, l := range lines {
		if n := len(l) - len(strings.TrimLeft(l, "#")); n > 0 && n <= level && strings.HasPrefix(l[n:], " ") {
			return strings.Join(lines[:i], ""), true
		}
	}
	return rest, true
}

// The map's code spans: a file, a directory, or a Go name, optionally
// followed by the file that declares it.
var (
	codeSpan   = regexp.MustCompile("`([^`]+)`( \\(`([^`]+\\.go)`)?")
	goName     = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$`)
	configKey  = regexp.MustCompile(`^[a-z0-9_]+(\.[a-z0-9_]+)+$`)
	unexported = regexp.MustCompile(`^[a-z]`)
)

// callMapProblems checks the spans of section against the module at root
// and its declarations. A file without a directory is under gateway/. A
// name is checked when it is a Go name that is not a configuration key
// (billing.max_store_wait) and, without a dot, starts lower case (an
// exported single word is a header or a type named elsewhere).
func callMapProblems(root, section string, decls map[string]map[string]bool) []string {
	var problems []string
	for _, m := range codeSpan.FindAllStringSubmatch(section, -1) {
		span, file := m[1], m[3]
		switch {
		case strings.HasPrefix(span, "/"): // a URL path
			continue
		case strings.HasSuffix(span, ".go") || strings.Contains(span, "/") && !strings.Contains(span, " "):
			if _, err := os.Stat(filepath.Join(root, mapPath(span))); err != nil {
				problems = append(problems, "README names "+span+", which does not exist")
			}
			continue
		case !goName.MatchString(span) || configKey.MatchString(span) && strings.Contains(span, "_"):
			continue
		case !strings.Contains(span, ".") && !unexported.MatchString(span):
			continue
		}
		if !decls[""][span] {
			problems = append(problems, "README names "+span+", which is declared nowhere")
			continue
		}
		if file != "" && !decls[filepath.ToSlash(mapPath(file))][span] {
			problems = append(problems, "README places "+span+" in "+file+", which does not declare it")
		}
	}
	return problems
}

// mapPath is a path the map names, from the module root: a bare file name
// is under gateway/.
func mapPath(p string) string {
	if !strings.Contains(p, "/") {
		return filepath.Join("gateway", p)
	}
	return filepath.FromSlash(p)
}

// declarations indexes the names the non-test Go files under root declare:
// per file (by its slash path from root) and, under "", for the whole
// module. A function is "F"; a method "T.M" and "M"; an interface's method "T.M"; a
// type, variable or constant its name; each also qualified by its
// package's name ("store.Ledger.Hold"), and each package's name itself.
func declarations(root string) (map[string]map[string]bool, error) {
	decls := map[string]map[string]bool{"": {}}
	files, err := goFiles(root, false)
	if err != nil {
		return nil, err
	}
	fset := token.NewFileSet()
	for _, path := range files {
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		rel, _ := filepath.Rel(root, path)
		names := map[string]bool{}
		for _, n := range declaredNames(f) {
			names[n], names[f.Name.Name+"."+n] = true, true
		}
		decls[filepath.ToSlash(rel)] = names
		for n := range names {
			decls[""][n] = true
		}
		decls[""][f.Name.Name] = true
	}
	return decls, nil
}

// declaredNames are the top-level names of f, methods as "T.M" and "M".
func declaredNames(f *ast.File) []string {
	var names []string
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if d.Recv == nil || len(d.Recv.List) == 0 {
				names = append(names, d.Name.Name)
				continue
			}
			names = append(names, receiverName(d.Recv.List[0].Type)+"."+d.Name.Name, d.Name.Name)
		case *ast.GenDecl:
			names = append(names, specNames(d)...)
		}
	}
	return names
}

// specNames are the names a type, var or const declaration declares, with
// an interface's methods as "I.M".
func specNames(d *ast.GenDecl) []string {
	var names []string
	for _, s := range d.Specs {
		switch s := s.(type) {
		case *ast.TypeSpec:
			names = append(names, s.Name.Name)
			if it, ok := s.Type.(*ast.InterfaceType); ok {
				for _, m := range it.Methods.List {
					for _, n := range m.Names {
						names = append(names, s.Name.Name+"."+n.Name)
					}
				}
			}
		case *ast.ValueSpec:
			for _, n := range s.Names {
				names = append(names, n.Name)
			}
		}
	}
	return names
}

// receiverName is the type name of a method's receiver: T for T, *T, T[P].
func receiverName(e ast.Expr) string {
	for {
		switch x := e.(type) {
		case *ast.StarExpr:
			e = x.X
		case *ast.IndexExpr:
			e = x.X
		case *ast.IndexListExpr:
			e = x.X
		case *ast.Ident:
			return x.Name
		default:
			return ""
		}
	}
}
