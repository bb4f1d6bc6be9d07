package surface

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// readme is the README's text, read once per test.
func readme(t *testing.T) (path string, lines []string) {
	t.Helper()
	path = filepath.Join("..", "..", "README.md")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return path, strings.Split(string(data), "\n")
}

// TestReadmeFences checks that every code fence the README opens it
// closes: one left open renders the rest of the page as code.
func TestReadmeFences(t *testing.T) {
	path, lines := readme(t)
	open := 0
	for i, l := range lines {
		if !strings.HasPrefix(strings.TrimSpace(l), "```") {
			continue
		}
		if open == 0 {
			open = i + 1
		} else {
			open = 0
		}
	}
	if open != 0 {
		t.Errorf("%s:%d opens a code fence that is never closed", path, open)
	}
}

var (
	exampleName = regexp.MustCompile(`\bExample[A-Za-z0-9_]*`)
	// exampleRow is a row of the README's table of Examples:
	// | `Name` | `path/file_test.go` | what it shows |
	exampleRow = regexp.MustCompile("^\\| `(?:[a-z]+\\.)?(Example[A-Za-z0-9_]*)` \\| `([^`]+_test\\.go)` \\|")
	// relLink is a link to a file of the repository.
	relLink = regexp.MustCompile(`\]\(([^)#:]+)\)`)
)

// TestReadmeExamples checks that go doc's blind spot is covered: every
// Example the README names is in its table of Examples, with the file that
// holds it (a path from the repository's root), and that file declares it.
func TestReadmeExamples(t *testing.T) {
	path, lines := readme(t)
	where := map[string]string{} // Example → its file, from the table
	for _, l := range lines {
		if m := exampleRow.FindStringSubmatch(l); m != nil {
			where[m[1]+" "+m[2]] = m[2]
			where[m[1]] = m[2]
		}
	}
	if len(where) == 0 {
		t.Fatalf("%s has no table of Examples (rows like | `budgettest.ExampleRun` | `budgettest/example_test.go` | ... |)", path)
	}
	for i, l := range lines {
		for _, name := range exampleName.FindAllString(l, -1) {
			if name == "Example" || name == "Examples" {
				continue // the word, not a name
			}
			if _, ok := where[name]; !ok {
				t.Errorf("%s:%d names %s, which the table of Examples does not list with its file", path, i+1, name)
			}
		}
	}
	decl := regexp.MustCompile(`(?m)^func (Example[A-Za-z0-9_]*)\(\)`)
	for key, file := range where {
		name, _, ok := strings.Cut(key, " ")
		if !ok {
			continue
		}
		data, err := os.ReadFile(filepath.Join("..", "..", filepath.FromSlash(file)))
		if err != nil {
			t.Errorf("the table of Examples puts %s in %s: %v", name, file, err)
			continue
		}
		found := false
		for _, m := range decl.FindAllStringSubmatch(string(data), -1) {
			found = found || m[1] == name
		}
		if !found {
			t.Errorf("the table of Examples puts %s in %s, which does not declare it", name, file)
		}
	}
}

// TestReadmeLinks checks that every link of the README to a file of the
// repository points at one that exists.
func TestReadmeLinks(t *testing.T) {
	path, lines := readme(t)
	for i, l := range lines {
		for _, m := range relLink.FindAllStringSubmatch(l, -1) {
			if strings.HasPrefix(m[1], "http") {
				continue
			}
			if _, err := os.Stat(filepath.Join("..", "..", filepath.FromSlash(m[1]))); err != nil {
				t.Errorf("%s:%d links to %s: %v", path, i+1, m[1], err)
			}
		}
	}
}
