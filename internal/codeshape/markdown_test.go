package codeshape

import (
	"bufio"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// workLog matches a reference to a work session or an issue by number: the
// documents say what is and why, and a number means nothing to a reader who
// was not there (the git history keeps who did what when).
var workLog = regexp.MustCompile(`(?i)(session|issue) [0-9]`)

// TestMarkdownNamesNoSessionOrIssue fails naming every line of a Markdown
// file of the repository that refers to a session or an issue by number.
func TestMarkdownNamesNoSessionOrIssue(t *testing.T) {
	t.Parallel()
	hits, err := workLogLines(moduleRoot(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range hits {
		t.Errorf("%s: refers to a session or issue by number; say what it decided instead", h)
	}
}

// TestWorkLogLinesFound checks the scan itself: a hit is found at any depth
// and in any case, and third-party and build directories are not read.
func TestWorkLogLinesFound(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	files := map[string]string{
		"README.md":                 "# x\n\nfine\nAs decided in Issue 28.\n",
		"docs/a.md":                 "measured in session 6\n",
		"docs/b.md":                 "a session cookie, issue tracker, issues 3\n",
		"docs/c.txt":                "issue 4 in a file that is not Markdown\n",
		"clients/node_modules/p.md": "issue 1\n",
		"vendor/v.md":               "issue 1\n",
		"build/r.md":                "issue 1\n",
		"bin/r.md":                  "issue 1\n",
		".git/r.md":                 "issue 1\n",
	}
	for name, text := range files {
		path := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	hits, err := workLogLines(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"README.md:4", "docs/a.md:1"}
	if strings.Join(hits, ",") != strings.Join(want, ",") {
		t.Fatalf("found %q; want %q", hits, want)
	}
}

// workLogLines returns "file:line" for every line of a Markdown file under
// root that workLog matches, in walk order. It skips version control,
// third-party code (node_modules, vendor) and the build outputs at the root.
func workLogLines(root string) ([]string, error) {
	var hits []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && skipDocDir(root, path, d.Name()) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.EqualFold(filepath.Ext(path), ".md") {
			return nil
		}
		found, err := workLogInFile(root, path)
		hits = append(hits, found...)
		return err
	})
	return hits, err
}

// skipDocDir reports whether a directory holds no Markdown of this project.
func skipDocDir(root, path, name string) bool {
	switch name {
	case ".git", "node_modules", "vendor":
		return true
	case "build", "bin":
		return filepath.Dir(path) == root
	}
	return false
}

// workLogInFile returns "file:line" for each matching line of one file.
func workLogInFile(root, path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	rel, err := filepath.Rel(root, path)
	if err != nil {
		return nil, err
	}
	var hits []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for n := 1; sc.Scan(); n++ {
		if workLog.MatchString(sc.Text()) {
			hits = append(hits, filepath.ToSlash(rel)+":"+strconv.Itoa(n))
		}
	}
	return hits, sc.Err()
}
