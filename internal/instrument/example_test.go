package instrument_test

import (
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"log"
	"os"
	"os/exec"

	"github.com/retrybudget/retrybudget/internal/instrument"
)

func ExampleFile() {
	const src = `package counter

import "sync"

type Counter struct {
	mu sync.Mutex
	n  int
}

func (c *Counter) Inc(done chan<- int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n++
	done <- c.n
}
`
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "/src/counter/counter.go", src, 0)
	if err != nil {
		log.Fatal(err)
	}
	info := &types.Info{
		Types:      map[ast.Expr]types.TypeAndValue{},
		Defs:       map[*ast.Ident]types.Object{},
		Uses:       map[*ast.Ident]types.Object{},
		Implicits:  map[ast.Node]types.Object{},
		Selections: map[*ast.SelectorExpr]*types.Selection{},
		Scopes:     map[ast.Node]*types.Scope{},
	}
	conf := types.Config{Importer: importer.Default()}
	if _, err := conf.Check("example.com/counter", fset, []*ast.File{f}, info); err != nil {
		log.Fatal(err)
	}
	out, points, err := instrument.File(fset, f, []byte(src), info)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%d yield points:\n%s", points, out)
	// Output:
	// 3 yield points:
	// /*line /src/counter/counter.go:1:1*/package counter; import ryield "github.com/retrybudget/retrybudget/yield"
	//
	// import "sync"
	//
	// type Counter struct {
	// 	mu sync.Mutex
	// 	n  int
	// }
	//
	// func (c *Counter) Inc(done chan<- int) {
	// 	ryield.Hook.M(&c.mu).Lock()
	// 	defer ryield.Hook.M(&c.mu).Unlock()
	// 	c.n++
	// 	ryield.Send(done, c.n)
	// }
	// var _ = ryield.Hook.Mark()
}

// Rewrite the packages of the module in the current directory, tests
// included, and run their tests on the rewritten code.
func ExampleRewrite() {
	res, err := instrument.Rewrite(instrument.Config{Patterns: []string{"./..."}, Tests: true})
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(res.Dir)
	fmt.Printf("%d files, %d yield points\n", len(res.Files), res.Points)
	cmd := exec.Command("go", "test", "-overlay", res.Overlay, "./...")
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		log.Fatal(err)
	}
}
