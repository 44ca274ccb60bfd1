package docs

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

var (
	mdLink   = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	testName = regexp.MustCompile(`\bTest[A-Z][A-Za-z0-9_]*`)
	testFunc = regexp.MustCompile(`(?m)^func (Test[A-Z][A-Za-z0-9_]*)\(`)
)

// pages are the README and every page of docs/, as paths from the repository's root.
func pages(t *testing.T) []string {
	t.Helper()
	out := []string{"README.md"}
	md, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range md {
		out = append(out, filepath.Join("docs", m))
	}
	return out
}

// outsideCode is text with its fenced blocks blanked: a shell comment there is not a heading and a
// bracket there is not a link.
func outsideCode(text string) string {
	var b strings.Builder
	fenced := false
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, "```") {
			fenced = !fenced
			b.WriteString("\n")
			continue
		}
		if !fenced {
			b.WriteString(l)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// anchors are the GitHub anchors of text's headings.
func anchors(text string) map[string]bool {
	out := map[string]bool{}
	for _, l := range strings.Split(outsideCode(text), "\n") {
		h := strings.TrimLeft(l, "#")
		if h == l || !strings.HasPrefix(h, " ") {
			continue
		}
		var b strings.Builder
		for _, r := range strings.ToLower(strings.TrimSpace(h)) {
			switch {
			case r == ' ' || r == '-':
				b.WriteRune('-')
			case r == '_' || ('a' <= r && r <= 'z') || ('0' <= r && r <= '9') || r > 127:
				b.WriteRune(r)
			}
		}
		out[b.String()] = true
	}
	return out
}

// TestLinksResolve: every relative link of the README and of docs/ names a file or folder of the
// repository, and a link's #anchor a heading of the page it names, so moving a section between
// pages cannot leave a reader at a dead end.
func TestLinksResolve(t *testing.T) {
	for _, page := range pages(t) {
		b, err := os.ReadFile(filepath.Join("..", page))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range mdLink.FindAllStringSubmatch(outsideCode(string(b)), -1) {
			link := m[1]
			if strings.Contains(link, "://") || strings.HasPrefix(link, "mailto:") {
				continue
			}
			path, anchor, _ := strings.Cut(link, "#")
			target := filepath.Join("..", filepath.Dir(page), path)
			if path == "" {
				path, target = page, filepath.Join("..", page)
			}
			st, err := os.Stat(target)
			if err != nil {
				t.Errorf("%s links to %s: no such file", page, link)
				continue
			}
			if anchor == "" || st.IsDir() || !strings.HasSuffix(target, ".md") {
				continue
			}
			tb, err := os.ReadFile(target)
			if err != nil {
				t.Fatal(err)
			}
			if !anchors(string(tb))[anchor] {
				t.Errorf("%s links to %s: %s has no heading with that anchor", page, link, path)
			}
		}
	}
}

// TestCitedTestsExist: each test the README and docs/ cite as proof of a claim is a test function
// of the repository, so a renamed or deleted test cannot leave a claim citing nothing.
func TestCitedTestsExist(t *testing.T) {
	defined := map[string]bool{}
	err := filepath.WalkDir("..", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != ".." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "_release" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, m := range testFunc.FindAllStringSubmatch(string(b), -1) {
			defined[m[1]] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	cited := 0
	for _, page := range pages(t) {
		b, err := os.ReadFile(filepath.Join("..", page))
		if err != nil {
			t.Fatal(err)
		}
		missing := map[string]bool{}
		for _, name := range testName.FindAllString(string(b), -1) {
			cited++
			if !defined[name] {
				missing[name] = true
			}
		}
		var names []string
		for n := range missing {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			t.Errorf("%s cites %s, which no _test.go defines", page, n)
		}
	}
	if cited == 0 {
		t.Error("no page cites a test: the pattern no longer matches how the docs cite them")
	}
}
