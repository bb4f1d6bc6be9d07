// Package surface holds the tests that keep the module's public API small:
// the count of exported names a reader of go doc meets in the public
// packages, and the rule that no name anywhere in the repository is kept
// as Deprecated.
package surface

import (
	"go/ast"
	"go/parser"
	"go/scanner"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// budget is the most exported names the public packages may have.
const budget = 300

const modulePath = "github.com/retrybudget/retrybudget"

// TestPublicSurface counts, in each public package of this module (not
// internal/, cmd/, testdata/ nor a nested module), its exported
// package-level names and the exported methods of its exported types,
// every one of them. A type that aliases a type of an internal package
// brings that type's exported methods, which go doc does not list under
// it, into the count. This is how the rapid (116), porcupine (25) and
// goleak (10) counts the project compares itself with were made.
func TestPublicSurface(t *testing.T) {
	root := filepath.Join("..", "..")
	counts := map[string]int{}
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			if rel == "." {
				return nil
			}
			base := d.Name()
			if strings.HasPrefix(base, ".") || base == "internal" || base == "cmd" || base == "testdata" || base == "docs" || base == "scripts" {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
				return filepath.SkipDir // a nested module
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
		if err != nil {
			return err
		}
		pkg := filepath.ToSlash(filepath.Dir(rel))
		counts[pkg] += count(t, root, f)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var pkgs []string
	total := 0
	for p, n := range counts {
		pkgs = append(pkgs, p)
		total += n
	}
	sort.Strings(pkgs)
	for _, p := range pkgs {
		t.Logf("%-16s %3d", p, counts[p])
	}
	t.Logf("%-16s %3d", "total", total)
	if counts["budget"] == 0 || counts["budgettest"] == 0 {
		t.Fatalf("no names counted in budget or budgettest: the walk missed the packages")
	}
	if total > budget {
		t.Errorf("the public packages export %d names, over the budget of %d: make a name internal", total, budget)
	}
}

// count returns the exported names f declares: its exported package-level
// names, the exported methods of its exported types, and the exported
// methods of the internal types its exported aliases name.
func count(t *testing.T, root string, f *ast.File) int {
	imports := map[string]string{}
	for _, im := range f.Imports {
		p, _ := strconv.Unquote(im.Path.Value)
		name := p[strings.LastIndex(p, "/")+1:]
		if im.Name != nil {
			name = im.Name.Name
		}
		imports[name] = p
	}
	n := 0
	for _, decl := range f.Decls {
		switch d := decl.(type) {
		case *ast.FuncDecl:
			if !d.Name.IsExported() || d.Recv != nil && !exportedRecv(d.Recv.List[0].Type) {
				continue
			}
			n++
		case *ast.GenDecl:
			for _, s := range d.Specs {
				switch s := s.(type) {
				case *ast.TypeSpec:
					if !s.Name.IsExported() {
						continue
					}
					n++
					if s.Assign.IsValid() {
						n += internalMethods(t, root, imports, s.Type)
					}
				case *ast.ValueSpec:
					for _, name := range s.Names {
						if name.IsExported() {
							n++
						}
					}
				}
			}
		}
	}
	return n
}

// exportedRecv reports whether a method's receiver type is exported.
func exportedRecv(e ast.Expr) bool { return ast.IsExported(recvName(e)) }

// internalMethods counts the exported methods of the type an alias names
// when that type is in an internal package of this module.
func internalMethods(t *testing.T, root string, imports map[string]string, e ast.Expr) int {
	if ix, ok := e.(*ast.IndexExpr); ok {
		e = ix.X
	}
	sel, ok := e.(*ast.SelectorExpr)
	if !ok {
		return 0
	}
	x, ok := sel.X.(*ast.Ident)
	if !ok {
		return 0
	}
	path, ok := strings.CutPrefix(imports[x.Name], modulePath+"/")
	if !ok || !strings.HasPrefix(path, "internal/") {
		return 0
	}
	files, err := filepath.Glob(filepath.Join(root, filepath.FromSlash(path), "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			if fd, ok := decl.(*ast.FuncDecl); ok && fd.Recv != nil && fd.Name.IsExported() && recvName(fd.Recv.List[0].Type) == sel.Sel.Name {
				n++
			}
		}
	}
	return n
}

// recvName is the name of a method's receiver type.
func recvName(e ast.Expr) string {
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

// TestNoDeprecated fails on every "Deprecated:" doc line in a non-test Go
// file of the repository: every module, testdata included. The project
// has not been released, so there is no one to keep an old name for: a
// name is renamed or deleted, and its callers changed, in one change.
func TestNoDeprecated(t *testing.T) {
	root := filepath.Join("..", "..")
	files := 0
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && strings.HasPrefix(d.Name(), ".") {
				return filepath.SkipDir // .git and other hidden trees
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		files++
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		for _, line := range deprecatedLines(src) {
			t.Errorf("%s:%d: a \"Deprecated:\" doc line: delete the name, and change its callers", filepath.ToSlash(rel), line)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 100 {
		t.Fatalf("read %d Go files: the walk missed the repository", files)
	}
	t.Logf("%d Go files read", files)
}

// deprecatedLines returns the lines of src where a line of a comment
// begins with "Deprecated:", as the deprecation paragraph of a doc
// comment does. It tokenizes src, so that a string that says so does not
// count, and a file that does not compile is still read.
func deprecatedLines(src []byte) []int {
	fset := token.NewFileSet()
	file := fset.AddFile("", fset.Base(), len(src))
	var s scanner.Scanner
	s.Init(file, src, nil, scanner.ScanComments)
	var lines []int
	for {
		pos, tok, lit := s.Scan()
		if tok == token.EOF {
			return lines
		}
		if tok != token.COMMENT {
			continue
		}
		first := fset.Position(pos).Line
		text := strings.TrimSuffix(strings.TrimPrefix(strings.TrimPrefix(lit, "//"), "/*"), "*/")
		for i, l := range strings.Split(text, "\n") {
			l = strings.TrimLeft(l, " \t")
			l = strings.TrimLeft(strings.TrimPrefix(l, "*"), " \t") // a block comment's margin
			if strings.HasPrefix(l, "Deprecated:") {
				lines = append(lines, first+i)
			}
		}
	}
}
