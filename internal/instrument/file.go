package instrument

import (
	"fmt"
	"go/ast"
	"go/token"
	"go/types"
	"strconv"
	"strings"

	"golang.org/x/tools/go/types/typeutil"
)

// YieldPath is the import path of the package whose hooks rewritten code
// calls.
const YieldPath = "github.com/retrybudget/retrybudget/yield"

// schedPath is the package that defines the hooks yield forwards: the
// methods of yield.Hook are its.
const schedPath = "github.com/retrybudget/retrybudget/internal/sched"

// File rewrites one parsed, type-checked file and returns its new source,
// and the number of yield points it inserted. It returns nil and 0 if the
// file has no synchronization operation it rewrites.
//
// fset must hold f, src must be the text f was parsed from, and info must
// hold the Types, Defs, Uses, Selections, Scopes and Implicits of f's
// package. The new source starts with a /*line*/ directive naming the
// file's name in fset, so positions in the compiled code name the original
// file, and every token of src keeps its line. That name should be
// absolute, as go/packages gives it: the compiler takes a relative one
// relative to the directory of the rewritten file.
func File(fset *token.FileSet, f *ast.File, src []byte, info *types.Info) ([]byte, int, error) {
	return FileWith(fset, f, src, info, Options{})
}

// Options are the optional rules of [FileWith].
type Options struct {
	// Fields also puts a yield point at each read and write of a field of
	// a struct type the file's package declares (see the package
	// documentation), except in _test.go files.
	Fields bool
}

// FileWith is [File] with the optional rules opt turns on.
func FileWith(fset *token.FileSet, f *ast.File, src []byte, info *types.Info, opt Options) ([]byte, int, error) {
	tf := fset.File(f.FileStart)
	if tf == nil {
		return nil, 0, fmt.Errorf("instrument: package %s: the file is not in the file set", f.Name.Name)
	}
	if tf.Size() != len(src) {
		return nil, 0, fmt.Errorf("instrument: %s: the source does not match the parsed file", tf.Name())
	}
	pkg := packageOf(f, info)
	if pkg == nil || callsHooks(f, info) {
		return nil, 0, nil
	}
	r := &rewriter{tf: tf, file: f, info: info, pkg: pkg, src: src}
	r.fields = opt.Fields && !strings.HasSuffix(tf.Name(), "_test.go")
	r.name = r.freeName("ryield")
	r.walk()
	if r.points == 0 {
		return nil, 0, nil
	}
	edits, err := resolveMoves(tf.Name(), src, r.edits, r.moves)
	if err != nil {
		return nil, 0, err
	}
	r.edits = edits
	pkgPos := fset.PositionFor(f.Package, false)
	r.insert(f.Package, fmt.Sprintf("/*line %s:%d:%d*/", tf.Name(), pkgPos.Line, pkgPos.Column), 0, false)
	r.insert(f.Name.End(), fmt.Sprintf("; import %s %s", r.name, strconv.Quote(YieldPath)), 0, false)
	marker := fmt.Sprintf("var _ = %s.Hook.Mark()\n", r.name)
	if len(src) > 0 && src[len(src)-1] != '\n' {
		marker = "\n" + marker
	}
	r.edits = append(r.edits, edit{start: len(src), end: len(src), text: marker, close: true})
	out, err := apply(tf.Name(), src, r.edits)
	if err != nil {
		return nil, 0, err
	}
	return out, r.points, nil
}

// callsHooks reports whether f calls the hooks of package yield itself,
// where it wants them (a hand-instrumented budget): such a file is left as
// it is. Other uses of the package (Instrumented, Options) do not count.
func callsHooks(f *ast.File, info *types.Info) bool {
	found := false
	ast.Inspect(f, func(n ast.Node) bool {
		if id, ok := n.(*ast.Ident); ok && !found {
			if fn, ok := info.Uses[id].(*types.Func); ok && fn.Pkg() != nil && (fn.Pkg().Path() == YieldPath || fn.Pkg().Path() == schedPath) && hookNames[fn.Name()] {
				found = true
			}
		}
		return !found
	})
	return found
}

// hookNames are the functions of package yield that rewritten code calls.
var hookNames = set("P", "Point", "M", "RW", "Send", "Recv", "Recv2", "Range", "Go", "Close", "O", "WG", "R", "S", "Select", "Gosched", "Spin")

// packageOf returns the package f's objects belong to, or nil if f
// declares and uses nothing.
func packageOf(f *ast.File, info *types.Info) *types.Package {
	if scope := info.Scopes[f]; scope != nil {
		for _, name := range scope.Names() {
			if pn, ok := scope.Lookup(name).(*types.PkgName); ok {
				return pn.Pkg()
			}
		}
	}
	var pkg *types.Package
	ast.Inspect(f, func(n ast.Node) bool {
		if id, ok := n.(*ast.Ident); ok && pkg == nil {
			if obj := info.Defs[id]; obj != nil {
				pkg = obj.Pkg()
			}
		}
		return pkg == nil
	})
	return pkg
}

// A rewriter collects the edits of one file.
type rewriter struct {
	tf     *token.File
	file   *ast.File
	info   *types.Info
	pkg    *types.Package
	src    []byte
	name   string // the import name of package yield in the file
	edits  []edit
	points int

	// leave holds the channel operations that stay as they are: the
	// communications of select cases and receives whose two-value form
	// Recv2 cannot take.
	leave map[ast.Node]bool
	// commaOK holds the receives of v, ok = <-ch forms, rewritten to Recv2.
	commaOK map[*ast.UnaryExpr]bool

	// fields turns on the rules of fields.go.
	fields bool
	// stack holds the ancestors of the node being visited, outermost
	// first.
	stack []ast.Node
	// plain holds the statements of statement lists (blocks and case
	// bodies), labels removed: a statement can go before them.
	plain map[ast.Stmt]bool
	// stores holds the accesses that are the value of a store into a
	// field (b.a = b.b), which fieldRead wraps in W rather than P.
	stores map[ast.Expr]bool

	// moves are the texts the go and select rewrites take elsewhere, and
	// moveOf the move of each node, whose depth the walk sets.
	moves  []*move
	moveOf map[ast.Node]*move
	// idents holds the names the file's identifiers spell; tmp is the
	// prefix of the temporaries of the go and select rewrites.
	idents map[string]bool
	tmp    string
}

// freeName returns base, or base followed by a number, that no identifier
// of the file spells and the package scope does not declare, so an import
// of that name neither clashes nor is shadowed anywhere in the file.
func (r *rewriter) freeName(base string) string {
	used := r.spelled()
	name := base
	for i := 2; used[name] || r.pkg.Scope().Lookup(name) != nil; i++ {
		name = base + strconv.Itoa(i)
	}
	return name
}

// spelled returns the names the identifiers of the file spell.
func (r *rewriter) spelled() map[string]bool {
	if r.idents == nil {
		r.idents = map[string]bool{}
		ast.Inspect(r.file, func(n ast.Node) bool {
			if id, ok := n.(*ast.Ident); ok {
				r.idents[id.Name] = true
			}
			return true
		})
	}
	return r.idents
}

// temp returns the name of a temporary of the go and select rewrites,
// r.name followed by _ and suffix, or another prefix than r.name if an
// identifier of the file, or a name of the package scope, starts with
// r.name and _: no temporary clashes with a name the file uses, nor
// shadows one it could use.
func (r *rewriter) temp(suffix string) string {
	if r.tmp == "" {
		clash := func(prefix string) bool {
			for name := range r.spelled() {
				if strings.HasPrefix(name, prefix) {
					return true
				}
			}
			for _, name := range r.pkg.Scope().Names() {
				if strings.HasPrefix(name, prefix) {
					return true
				}
			}
			return false
		}
		r.tmp = r.name
		for i := 2; clash(r.tmp + "_"); i++ {
			r.tmp = r.name + "x" + strconv.Itoa(i)
		}
	}
	return r.tmp + "_" + suffix
}

// moveText registers the move of n's text, with its edits, and returns the
// key to put where the text goes; covered says another edit replaces n's
// text, else the move removes it.
func (r *rewriter) moveText(n ast.Node, covered bool) string {
	m := &move{start: r.offset(n.Pos()), end: r.offset(n.End()), key: fmt.Sprintf("\x00%d\x00", len(r.moves)), covered: covered}
	r.moves = append(r.moves, m)
	r.moveOf[n] = m
	return m.key
}

func (r *rewriter) offset(pos token.Pos) int { return r.tf.Offset(pos) }

func (r *rewriter) insert(pos token.Pos, text string, depth int, close bool) {
	at := r.offset(pos)
	r.edits = append(r.edits, edit{start: at, end: at, text: text, depth: depth, close: close})
}

func (r *rewriter) replace(from, to token.Pos, text string, depth int) {
	r.replaceAt(r.offset(from), r.offset(to), text, depth)
}

// replaceAt is replace, by offsets.
func (r *rewriter) replaceAt(from, to int, text string, depth int) {
	r.edits = append(r.edits, edit{start: from, end: to, text: text, depth: depth})
}

// wrap surrounds e with before and after, for a node at depth.
func (r *rewriter) wrap(e ast.Node, before, after string, depth int) {
	r.insert(e.Pos(), before, depth, false)
	r.insert(e.End(), after, depth, true)
}

// walk visits the file and collects its edits.
func (r *rewriter) walk() {
	r.leave = map[ast.Node]bool{}
	r.commaOK = map[*ast.UnaryExpr]bool{}
	r.plain = map[ast.Stmt]bool{}
	r.moveOf = map[ast.Node]*move{}
	depth := 0
	ast.Inspect(r.file, func(n ast.Node) bool {
		if n == nil {
			depth--
			r.stack = r.stack[:len(r.stack)-1]
			return true
		}
		depth++
		if m := r.moveOf[n]; m != nil {
			m.depth = depth
		}
		r.visit(n, depth)
		r.stack = append(r.stack, n)
		return true
	})
}

// visit records the edits of node n at depth. A parent is visited before
// its children, so marks made here apply to them.
func (r *rewriter) visit(n ast.Node, depth int) {
	switch n := n.(type) {
	case *ast.CommClause:
		r.leaveComm(n.Comm)
		r.selects(n.Body, depth)
		r.markPlain(n.Body)
	case *ast.CaseClause:
		r.selects(n.Body, depth)
		r.markPlain(n.Body)
	case *ast.BlockStmt:
		r.selects(n.List, depth)
		r.markPlain(n.List)
	case *ast.AssignStmt:
		if len(n.Lhs) == 2 && len(n.Rhs) == 1 {
			r.twoValueRecv(n.Rhs[0], r.info.TypeOf(n.Lhs[1]), isBlank(n.Lhs[1]))
		}
		if r.fields {
			r.fieldWrite(n, depth)
		}
	case *ast.IncDecStmt:
		if r.fields {
			r.fieldWrite(n, depth)
		}
	case *ast.IndexExpr:
		if r.fields {
			r.fieldRead(n, depth)
		}
	case *ast.ValueSpec:
		if len(n.Names) == 2 && len(n.Values) == 1 {
			var okType types.Type
			if n.Type != nil {
				okType = r.info.TypeOf(n.Type)
			}
			r.twoValueRecv(n.Values[0], okType, n.Type == nil || n.Names[1].Name == "_")
		}
	case *ast.CallExpr:
		r.atomicCall(n, depth)
		r.closeCall(n, depth)
		r.goschedCall(n, depth)
		r.sleepCall(n, depth)
	case *ast.GoStmt:
		r.goStmt(n, depth)
	case *ast.SelectorExpr:
		r.method(n, depth)
		if r.fields {
			r.fieldRead(n, depth)
		}
	case *ast.SendStmt:
		r.send(n, depth)
	case *ast.UnaryExpr:
		r.recv(n, depth)
	case *ast.RangeStmt:
		r.rangeChan(n, depth)
	}
}

// rangeChan rewrites a range over a channel to a range over the function
// ryield.Range returns, which receives through ryield.Recv2:
// for v := range ch -> for v := range ryield.Range(ch). break, continue,
// labels and return keep their meaning.
func (r *rewriter) rangeChan(n *ast.RangeStmt, depth int) {
	if _, ok := r.chanType(n.X); !ok {
		return
	}
	r.wrap(n.X, r.name+".Range(", ")", depth)
	r.points++
}

func isBlank(e ast.Expr) bool {
	id, ok := e.(*ast.Ident)
	return ok && id.Name == "_"
}

// leaveComm marks the communication of a select case, which stays as it
// is; its operands are still rewritten.
func (r *rewriter) leaveComm(comm ast.Stmt) {
	switch s := comm.(type) {
	case *ast.SendStmt:
		r.leave[s] = true
	case *ast.ExprStmt:
		r.leave[ast.Unparen(s.X)] = true
	case *ast.AssignStmt:
		if len(s.Rhs) == 1 {
			r.leave[ast.Unparen(s.Rhs[0])] = true
		}
	}
}

// twoValueRecv marks rhs of v, ok = rhs if it is a receive: Recv2 takes it
// when its bool result can go where the untyped bool of <-ch went (okType
// is the type of ok; blank when ok takes any type), and it stays as it is
// otherwise.
func (r *rewriter) twoValueRecv(rhs ast.Expr, okType types.Type, blank bool) {
	u, ok := ast.Unparen(rhs).(*ast.UnaryExpr)
	if !ok || u.Op != token.ARROW || r.leave[u] {
		return
	}
	if blank || okType != nil && types.AssignableTo(types.Typ[types.Bool], okType) {
		r.commaOK[u] = true
	} else {
		r.leave[u] = true
	}
}

// selects rewrites every select statement of list to a switch on
// ryield.Select (see selectStmt), or, when it cannot, puts a yield point
// before it, and before its labels if it has any, so the labels stay on
// the select.
func (r *rewriter) selects(list []ast.Stmt, depth int) {
	for _, s := range list {
		inner := s
		for {
			l, ok := inner.(*ast.LabeledStmt)
			if !ok {
				break
			}
			inner = l.Stmt
		}
		if sel, ok := inner.(*ast.SelectStmt); ok {
			if !r.selectStmt(sel, depth) {
				r.insert(s.Pos(), r.name+".Hook.Point(); ", depth, false)
			}
			r.points++
		}
	}
}

// atomicCall wraps the first argument of a call of a function of
// sync/atomic: atomic.AddInt64(&n, 1) -> atomic.AddInt64(ryield.P(&n), 1).
func (r *rewriter) atomicCall(call *ast.CallExpr, depth int) {
	fn := typeutil.StaticCallee(r.info, call)
	if fn == nil || fn.Pkg() == nil || fn.Pkg().Path() != "sync/atomic" {
		return
	}
	sig := fn.Signature()
	if sig.Recv() != nil || len(call.Args) == 0 || len(call.Args) != sig.Params().Len() || call.Ellipsis.IsValid() {
		return // a method (see method), or f(g()) with g's results as the arguments
	}
	arg := call.Args[0]
	if tv, ok := r.info.Types[arg]; !ok || isUntyped(tv.Type) {
		return // P cannot take an untyped nil
	}
	r.wrap(arg, r.name+".P(", ")", depth)
	r.points++
}

func isUntyped(t types.Type) bool {
	b, ok := t.(*types.Basic)
	return ok && b.Info()&types.IsUntyped != 0
}

// hooks says which hook takes the receiver of the methods of each type
// that method rewrites, by package path and type name, and which methods.
var hooks = map[[2]string]struct {
	hook    string
	methods map[string]bool // nil: every method
}{
	{"sync", "Mutex"}:          {"Hook.M", set("Lock", "Unlock", "TryLock")},
	{"sync", "RWMutex"}:        {"Hook.RW", set("Lock", "Unlock", "RLock", "RUnlock", "TryLock", "TryRLock", "RLocker")},
	{"sync", "Once"}:           {"Hook.O", set("Do")},
	{"sync", "Cond"}:           {"Hook.C", set("Wait", "Signal", "Broadcast")},
	{"sync", "WaitGroup"}:      {"Hook.WG", set("Go", "Wait")},
	{"sync/atomic", "Int32"}:   {"P", nil},
	{"sync/atomic", "Int64"}:   {"P", nil},
	{"sync/atomic", "Uint32"}:  {"P", nil},
	{"sync/atomic", "Uint64"}:  {"P", nil},
	{"sync/atomic", "Uintptr"}: {"P", nil},
	{"sync/atomic", "Bool"}:    {"P", nil},
	{"sync/atomic", "Value"}:   {"P", nil},
	{"sync/atomic", "Pointer"}: {"P", nil},
}

func set(names ...string) map[string]bool {
	m := map[string]bool{}
	for _, n := range names {
		m[n] = true
	}
	return m
}

// method wraps the receiver of a method of a type in hooks, called or
// taken as a method value, in the hook as a pointer:
// b.mu.Lock() -> ryield.Hook.M(&b.mu).Lock(), p.Add(1) -> ryield.P(p).Add(1),
// and through embedded fields, s.Lock() -> ryield.Hook.M(&s.Mutex).Lock().
func (r *rewriter) method(sel *ast.SelectorExpr, depth int) {
	s := r.info.Selections[sel]
	if s == nil || s.Kind() != types.MethodVal {
		return
	}
	fn, ok := s.Obj().(*types.Func)
	if !ok || fn.Pkg() == nil {
		return
	}
	recv, ok := types.Unalias(deref(fn.Signature().Recv().Type())).(*types.Named)
	if !ok {
		return
	}
	h, ok := hooks[[2]string{fn.Pkg().Path(), recv.Obj().Name()}]
	if !ok || h.methods != nil && !h.methods[fn.Name()] {
		return
	}
	// Spell the fields of the path to the embedded receiver.
	path := ""
	t := r.info.TypeOf(sel.X)
	if t == nil {
		return
	}
	index := s.Index()
	for _, i := range index[:len(index)-1] {
		st, ok := deref(t).Underlying().(*types.Struct)
		if !ok || i >= st.NumFields() {
			return
		}
		f := st.Field(i)
		if !f.Exported() && f.Pkg() != r.pkg {
			return // the field cannot be named here
		}
		path += "." + f.Name()
		t = f.Type()
	}
	amp := "&"
	if _, ok := t.Underlying().(*types.Pointer); ok {
		amp = ""
	}
	r.wrap(sel.X, r.name+"."+h.hook+"("+amp, path+")", depth)
	r.points++
}

func deref(t types.Type) types.Type {
	if p, ok := t.Underlying().(*types.Pointer); ok {
		return p.Elem()
	}
	return t
}

// send rewrites ch <- v to ryield.Send(ch, v). When v's type is not the
// channel's element type (an interface, say), the element type is given
// as a type argument, or the send stays as it is if it cannot be spelled.
func (r *rewriter) send(s *ast.SendStmt, depth int) {
	if r.leave[s] {
		return
	}
	ch, ok := r.chanType(s.Chan)
	if !ok {
		return
	}
	targs, ok := r.sendTypeArgs(ch, s.Value, s.Pos())
	if !ok {
		return
	}
	r.insert(s.Chan.Pos(), r.name+".Send"+targs+"(", depth, false)
	if r.blanks(s.Chan.End(), s.Value.Pos()) {
		r.replace(s.Chan.End(), s.Value.Pos(), ", ", depth)
	} else {
		r.replace(s.Arrow, s.Arrow+2, ",", depth) // keep the comments and newlines around it
	}
	r.insert(s.Value.End(), ")", depth, true)
	r.points++
}

// sendTypeArgs returns the type arguments, "" or "[T]", that Send or S
// needs for a send of v on a channel of type ch, spelled at pos: the
// element type when v's type is another one; false if that type cannot be
// spelled.
func (r *rewriter) sendTypeArgs(ch *types.Chan, v ast.Expr, pos token.Pos) (string, bool) {
	tv, ok := r.info.Types[v]
	if !ok {
		return "", false
	}
	if types.Identical(tv.Type, ch.Elem()) || isUntyped(tv.Type) {
		return "", true
	}
	elem, ok := r.spell(ch.Elem(), pos)
	if !ok {
		return "", false
	}
	return "[" + elem + "]", true
}

// recv rewrites <-ch to ryield.Recv(ch), or to ryield.Recv2(ch) in the
// v, ok = <-ch forms.
func (r *rewriter) recv(u *ast.UnaryExpr, depth int) {
	if u.Op != token.ARROW || r.leave[u] {
		return
	}
	if _, ok := r.chanType(u.X); !ok {
		return
	}
	hook := ".Recv("
	if r.commaOK[u] {
		hook = ".Recv2("
	}
	r.replace(u.OpPos, u.OpPos+2, r.name+hook, depth)
	r.insert(u.X.End(), ")", depth, true)
	r.points++
}

// chanType returns the channel type of e, if the hooks can infer their
// type argument from it: not for a type parameter.
func (r *rewriter) chanType(e ast.Expr) (*types.Chan, bool) {
	t := r.info.TypeOf(e)
	if t == nil {
		return nil, false
	}
	if _, ok := types.Unalias(t).(*types.TypeParam); ok {
		return nil, false
	}
	ch, ok := t.Underlying().(*types.Chan)
	return ch, ok
}

// blanks reports whether the text between from and to is spaces, tabs
// and the arrow of a send.
func (r *rewriter) blanks(from, to token.Pos) bool {
	for _, c := range r.src[r.offset(from):r.offset(to)] {
		if c != ' ' && c != '\t' && c != '<' && c != '-' {
			return false
		}
	}
	return true
}
