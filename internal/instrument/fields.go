package instrument

import (
	"bytes"
	"go/ast"
	"go/token"
	"go/types"
	"slices"
	"strings"
)

// The rules of Options.Fields: yield points at the reads and writes of the
// fields of the struct types the file's package declares, so that code
// with no synchronization at all (b.tokens -= c from several goroutines)
// can be switched between a read and the write that depends on it.
//
// An access is a selector x.f of such a field, followed by any number of
// further field selectors (of any package's fields) and index expressions:
// b.tokens, b.s.n, b.arr[i], b.m[k], b.pt.X. Only a whole access counts;
// its prefixes (b.s in b.s.n, b.arr in b.arr[i]) are not accesses of their
// own. An access whose type is one of sync or sync/atomic is left to the
// rules of those packages.

// markPlain records the statements of list, under their labels, as plain:
// a statement can be put before them.
func (r *rewriter) markPlain(list []ast.Stmt) {
	for _, s := range list {
		for {
			l, ok := s.(*ast.LabeledStmt)
			if !ok {
				break
			}
			s = l.Stmt
		}
		r.plain[s] = true
	}
}

// ownField reports whether e is a selector of a field that the file's
// package declares.
func (r *rewriter) ownField(e ast.Expr) bool {
	sel, ok := e.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	s := r.info.Selections[sel]
	if s == nil || s.Kind() != types.FieldVal {
		return false
	}
	v, ok := s.Obj().(*types.Var)
	return ok && v.Pkg() != nil && v.Pkg().Path() == r.pkg.Path()
}

// path reports whether e is an access, whatever its type: an own field
// selector, or a field selector or index expression of an access.
func (r *rewriter) path(e ast.Expr) bool {
	switch e := ast.Unparen(e).(type) {
	case *ast.SelectorExpr:
		if s := r.info.Selections[e]; s == nil || s.Kind() != types.FieldVal {
			return false
		}
		return r.ownField(e) || r.path(e.X)
	case *ast.IndexExpr:
		t := r.info.TypeOf(e.X)
		if t == nil {
			return false
		}
		if _, ok := t.Underlying().(*types.Signature); ok {
			return false // an instantiation
		}
		return r.path(e.X)
	}
	return false
}

// access reports whether e is an access the rules instrument: one whose
// type is not of sync or sync/atomic.
func (r *rewriter) access(e ast.Expr) bool {
	if !r.path(e) {
		return false
	}
	t := r.info.TypeOf(e)
	return t != nil && !isSyncType(t)
}

// isSyncType reports whether t, or what it points to, is a named type of
// sync or sync/atomic.
func isSyncType(t types.Type) bool {
	n, ok := types.Unalias(deref(t)).(*types.Named)
	if !ok || n.Obj().Pkg() == nil {
		return false
	}
	p := n.Obj().Pkg().Path()
	return p == "sync" || p == "sync/atomic"
}

// fieldRead wraps an access read as a value: x := b.tokens ->
// x := ryield.P(b.tokens). It leaves the accesses that are not read as a
// value, whose evaluation must stay where it is, or that P cannot take:
// those assigned to (see fieldWrite), incremented or ranged into, whose
// address is taken, that are the base of a selector, an index or a slice
// expression (b.s.n, b.arr[i], b.buf[:n], b.clock.Now()), that are called
// (b.f()), that are a composite literal's key, the map index of a
// two-value assignment (v, ok := b.m[k]), or that are inside the function
// expression of a go or defer statement, a constant expression
// (len(b.arr)) or an argument of unsafe.Sizeof, Offsetof or Alignof.
func (r *rewriter) fieldRead(e ast.Expr, depth int) {
	if !r.access(e) || !r.readAt(e) {
		return
	}
	hook := ".P("
	if r.stores[e] {
		hook = ".W(" // the value of a store into a field: b.a = b.b
	}
	r.wrap(e, r.name+hook, ")", depth)
	r.points++
}

// readAt reports whether the access e, the node being visited, is read as
// a value that P may take.
func (r *rewriter) readAt(e ast.Expr) bool {
	var child ast.Node = e
	i := len(r.stack) - 1
	for ; i >= 0; i-- {
		p, ok := r.stack[i].(*ast.ParenExpr)
		if !ok {
			break
		}
		child = p
	}
	if i < 0 {
		return false
	}
	switch p := r.stack[i].(type) {
	case *ast.AssignStmt:
		if slices.Contains(p.Lhs, child.(ast.Expr)) {
			return false
		}
		if len(p.Lhs) == 2 && len(p.Rhs) == 1 {
			return false // v, ok = b.m[k]
		}
	case *ast.ValueSpec:
		if len(p.Names) == 2 && len(p.Values) == 1 {
			return false // var v, ok = b.m[k]
		}
	case *ast.IncDecStmt:
		return false
	case *ast.RangeStmt:
		if child == p.Key || child == p.Value {
			return false
		}
	case *ast.UnaryExpr:
		if p.Op == token.AND {
			return false
		}
	case *ast.SelectorExpr:
		return false // child is p.X
	case *ast.IndexExpr:
		if child == p.X {
			return false
		}
	case *ast.IndexListExpr:
		if child == p.X {
			return false
		}
	case *ast.SliceExpr:
		if child == p.X {
			return false
		}
	case *ast.CallExpr:
		if child == p.Fun {
			return false
		}
	case *ast.KeyValueExpr:
		if child == p.Key && i > 0 {
			if _, ok := r.stack[i-1].(*ast.CompositeLit); ok {
				return false
			}
		}
	}
	for ; i >= 0; i-- {
		switch n := r.stack[i].(type) {
		case *ast.FuncLit:
			return true
		case *ast.CallExpr:
			if r.unsafeCall(n) {
				return false
			}
			if child == n.Fun && i > 0 {
				switch r.stack[i-1].(type) {
				case *ast.GoStmt, *ast.DeferStmt:
					return false
				}
			}
		case ast.Stmt:
			return true
		}
		if x, ok := r.stack[i].(ast.Expr); ok {
			if tv, ok := r.info.Types[x]; ok && tv.Value != nil {
				return false // a constant: len(b.arr)
			}
		}
		child = r.stack[i]
	}
	return true
}

// unsafeCall reports whether call calls unsafe.Sizeof, Offsetof or
// Alignof, whose arguments are not evaluated (and Offsetof's must be a
// selector).
func (r *rewriter) unsafeCall(call *ast.CallExpr) bool {
	var id *ast.Ident
	switch f := ast.Unparen(call.Fun).(type) {
	case *ast.Ident:
		id = f
	case *ast.SelectorExpr:
		id = f.Sel
	default:
		return false
	}
	b, ok := r.info.Uses[id].(*types.Builtin)
	if !ok {
		return false
	}
	switch b.Name() {
	case "Sizeof", "Offsetof", "Alignof":
		return true
	}
	return false
}

// fieldWrite puts a yield point before an assignment or an increment that
// stores into an access, when it is a statement of a block or a case
// body (not the init or post statement of an if, for or switch, nor a
// select case's communication), and moves the store after a yield point of
// its own:
//
//	b.tokens = x - c -> ryield.Hook.Point(); b.tokens = ryield.W(x - c)
//	b.tokens -= c    -> ryield.Hook.Point(); b.tokens = ryield.W(b.tokens - c)
//	b.tokens++       -> ryield.Hook.Point(); b.tokens = ryield.W(b.tokens + 1)
//
// An assignment of one value gets its value wrapped, with the type of the
// left-hand side as P's type argument when the value's type is not that
// (an untyped constant, nil, a concrete value for an interface), or not if
// that type cannot be spelled in the file; a value that is itself an
// access is wrapped as a read already. An assignment operation or an
// increment is spelled as an assignment when its left-hand side is a chain
// of field selectors of a variable, which evaluate the same the second
// time; other ones (b.m[k]++), and assignments of several values, only get
// the yield point before them.
func (r *rewriter) fieldWrite(s ast.Stmt, depth int) {
	var lhs []ast.Expr
	switch s := s.(type) {
	case *ast.AssignStmt:
		if s.Tok == token.DEFINE {
			return
		}
		lhs = s.Lhs
	case *ast.IncDecStmt:
		lhs = []ast.Expr{s.X}
	}
	if !r.plain[s] || !slices.ContainsFunc(lhs, r.access) {
		return
	}
	r.insert(s.Pos(), r.name+".Hook.Point(); ", depth, false)
	r.points++
	switch s := s.(type) {
	case *ast.AssignStmt:
		if len(s.Lhs) != 1 || len(s.Rhs) != 1 {
			r.storedReads(s.Rhs)
			return
		}
		if s.Tok == token.ASSIGN {
			if !r.wrapValue(s.Lhs[0], s.Rhs[0], s.Pos(), depth) {
				r.storedReads(s.Rhs)
			}
			return
		}
		text, ok := r.lhsText(s.Lhs[0])
		if !ok {
			return
		}
		op := strings.TrimSuffix(s.Tok.String(), "=")
		end := s.TokPos + token.Pos(len(s.Tok.String()))
		if c := r.src[r.offset(end)]; c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			op += " " // b.n-=-c -> b.n = ryield.W(b.n - -c), not b.n --c
		}
		r.replace(s.TokPos, end, "= "+r.name+".W("+text+" "+op, depth)
		close := ")"
		if _, ok := s.Rhs[0].(*ast.BinaryExpr); ok {
			r.insert(s.Rhs[0].Pos(), "(", depth, false)
			close = "))"
		}
		r.insert(s.Rhs[0].End(), close, depth, true)
		r.points++
	case *ast.IncDecStmt:
		text, ok := r.lhsText(s.X)
		if !ok {
			return
		}
		op := "+"
		if s.Tok == token.DEC {
			op = "-"
		}
		r.replace(s.TokPos, s.TokPos+2, " = "+r.name+".W("+text+" "+op+" 1)", depth)
		r.points++
	}
}

// storedReads marks the accesses read in values, the values of an
// assignment into a field that no W wraps, so that fieldRead wraps them in
// W: the store follows their yield point with no other between.
func (r *rewriter) storedReads(values []ast.Expr) {
	for _, v := range values {
		ast.Inspect(v, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.FuncLit:
				return false // its reads are not before the store
			case ast.Expr:
				if r.access(n) {
					if r.stores == nil {
						r.stores = map[ast.Expr]bool{}
					}
					r.stores[n] = true
				}
			}
			return true
		})
	}
}

// wrapValue wraps the value rhs assigned to lhs in W, and reports whether
// it did: it leaves it if P cannot take it, and if it is an access, which
// fieldRead wraps (see storedReads).
func (r *rewriter) wrapValue(lhs, rhs ast.Expr, pos token.Pos, depth int) bool {
	if r.access(ast.Unparen(rhs)) {
		return false
	}
	lt := r.info.TypeOf(lhs)
	tv, ok := r.info.Types[rhs]
	if lt == nil || !ok {
		return false
	}
	targs := ""
	if tv.Value != nil || tv.IsNil() || r.untyped(rhs) || r.genericValue(rhs) || !types.Identical(tv.Type, lt) {
		t, ok := r.spell(lt, pos)
		if !ok {
			return false
		}
		targs = "[" + t + "]"
	}
	r.wrap(rhs, r.name+".W"+targs+"(", ")", depth)
	r.points++
	return true
}

// untyped reports whether e, a value whose recorded type may be the one
// the assignment gave it, is untyped on its own: a constant, nil, a
// comparison, a shift of an untyped value, or an operation on untyped
// values only.
func (r *rewriter) untyped(e ast.Expr) bool {
	if tv, ok := r.info.Types[e]; ok && (tv.Value != nil || tv.IsNil()) {
		return true
	}
	switch e := e.(type) {
	case *ast.ParenExpr:
		return r.untyped(e.X)
	case *ast.UnaryExpr:
		switch e.Op {
		case token.ADD, token.SUB, token.XOR, token.NOT:
			return r.untyped(e.X)
		}
	case *ast.BinaryExpr:
		switch e.Op {
		case token.EQL, token.NEQ, token.LSS, token.LEQ, token.GTR, token.GEQ:
			return true
		case token.SHL, token.SHR:
			return r.untyped(e.X)
		}
		return r.untyped(e.X) && r.untyped(e.Y)
	}
	return false
}

// genericValue reports whether e names a generic function whose type
// arguments the assignment infers: P could not infer its own from it.
func (r *rewriter) genericValue(e ast.Expr) bool {
	var id *ast.Ident
	switch e := ast.Unparen(e).(type) {
	case *ast.Ident:
		id = e
	case *ast.SelectorExpr:
		id = e.Sel
	case *ast.IndexExpr:
		return r.genericValue(e.X)
	case *ast.IndexListExpr:
		return r.genericValue(e.X)
	}
	fn, ok := r.info.Uses[id].(*types.Func)
	return ok && fn.Signature().TypeParams().Len() > 0
}

// lhsText returns the source of the left-hand side e if it is a chain of
// field selectors of a variable, on one line.
func (r *rewriter) lhsText(e ast.Expr) (string, bool) {
	for x := ast.Unparen(e); ; {
		if id, ok := x.(*ast.Ident); ok {
			if _, ok := r.info.Uses[id].(*types.Var); !ok {
				return "", false
			}
			break
		}
		sel, ok := x.(*ast.SelectorExpr)
		if !ok {
			return "", false
		}
		if s := r.info.Selections[sel]; s == nil || s.Kind() != types.FieldVal {
			return "", false
		}
		x = ast.Unparen(sel.X)
	}
	text := r.src[r.offset(e.Pos()):r.offset(e.End())]
	if bytes.ContainsAny(text, "\n\r") {
		return "", false
	}
	return string(text), true
}
