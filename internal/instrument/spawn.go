package instrument

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/token"
	"go/types"
	"strconv"
	"strings"

	"golang.org/x/tools/go/types/typeutil"
)

// The rules of the goroutines' operations: go statements, close, and
// select statements.

// closeCall rewrites close(ch) to ryield.Close(ch): a call of the builtin
// close, not of a function that shadows it, on a channel whose type Close
// can infer its type argument from. The close of go close(ch) is left, as
// that go statement is.
func (r *rewriter) closeCall(call *ast.CallExpr, depth int) {
	id, ok := call.Fun.(*ast.Ident)
	if !ok || r.info.Uses[id] != types.Universe.Lookup("close") || len(call.Args) != 1 {
		return
	}
	if n := len(r.stack); n > 0 {
		if g, ok := r.stack[n-1].(*ast.GoStmt); ok && g.Call == call {
			return
		}
	}
	if _, ok := r.chanType(call.Args[0]); !ok {
		return
	}
	r.replace(id.Pos(), id.End(), r.name+".Close", depth)
	r.points++
}

// goschedCall wraps the function of a call of runtime.Gosched in
// ryield.Spin, which tells a controlled run that the goroutine is waiting
// for another and returns the function, so that the call is still made:
// runtime.Gosched() -> ryield.Hook.Spin(runtime.Gosched)(). The calls of go and
// defer statements (defer runtime.Gosched()) are left, and so is the
// function as a value (f := runtime.Gosched).
func (r *rewriter) goschedCall(call *ast.CallExpr, depth int) {
	fn := typeutil.StaticCallee(r.info, call)
	if fn == nil || fn.Pkg() == nil || fn.Pkg().Path() != "runtime" || fn.Name() != "Gosched" || len(call.Args) != 0 {
		return
	}
	if n := len(r.stack); n > 0 {
		switch s := r.stack[n-1].(type) {
		case *ast.GoStmt:
			if s.Call == call {
				return
			}
		case *ast.DeferStmt:
			if s.Call == call {
				return
			}
		}
	}
	r.wrap(call.Fun, r.name+".Hook.Spin(", ")", depth)
	r.points++
}

// sleepCall sends a call of time.Sleep through ryield.Sleep, which under
// control is a blocking operation that passes the baton while the
// goroutine sleeps (time.Sleep would keep it, and the other goroutines
// would wait out the sleep): time.Sleep(d) -> ryield.Hook.Sleeper(time.Sleep)(d),
// which keeps the file's use of its import of time. The call of a go
// statement is left, as its go statement is rewritten.
func (r *rewriter) sleepCall(call *ast.CallExpr, depth int) {
	fn := typeutil.StaticCallee(r.info, call)
	if fn == nil || fn.Pkg() == nil || fn.Pkg().Path() != "time" || fn.Name() != "Sleep" || len(call.Args) != 1 {
		return
	}
	if n := len(r.stack); n > 0 {
		if s, ok := r.stack[n-1].(*ast.GoStmt); ok && s.Call == call {
			return
		}
	}
	r.wrap(call.Fun, r.name+".Hook.Sleeper(", ")", depth)
	r.points++
}

// staticFunc reports whether e denotes a declared function, which needs no
// evaluation: a function's name, qualified or not, or an instantiation of
// one; not a variable, a method value nor a method expression.
func (r *rewriter) staticFunc(e ast.Expr) bool {
	switch e := ast.Unparen(e).(type) {
	case *ast.Ident:
		_, ok := r.info.Uses[e].(*types.Func)
		return ok
	case *ast.SelectorExpr:
		if r.info.Selections[e] != nil {
			return false
		}
		_, ok := r.info.Uses[e.Sel].(*types.Func)
		return ok
	case *ast.IndexExpr:
		return r.staticFunc(e.X)
	case *ast.IndexListExpr:
		return r.staticFunc(e.X)
	}
	return false
}

// isBuiltin reports whether e names a builtin function (or one of package
// unsafe).
func (r *rewriter) isBuiltin(e ast.Expr) bool {
	var id *ast.Ident
	switch e := ast.Unparen(e).(type) {
	case *ast.Ident:
		id = e
	case *ast.SelectorExpr:
		id = e.Sel
	default:
		return false
	}
	_, ok := r.info.Uses[id].(*types.Builtin)
	return ok
}

// What goStmt does with the function value and each argument of a go
// statement.
const (
	bind     = iota // evaluated into a temporary at the go statement
	copyText        // needs no evaluation: its text goes into the closure
)

// goStmt rewrites go F(A1, A2) so that the goroutine starts through
// ryield.Go, with the function value and the arguments still evaluated by
// the goroutine that runs the statement, in their order, and each token
// on its line:
//
//	go F(A1, A2) -> { ryield_f, ryield_0, ryield_1 := F, A1, A2; ryield.Hook.Go(func() { ryield_f(ryield_0, ryield_1) }) }
//
// A declared function F (f, pkg.F, g[int], and a generic g called without
// its type arguments, which := could not take), a constant argument and
// nil, whose default type := would give them, and a declared function
// passed as an argument need no evaluation: their text goes into the
// closure instead, if it has no newline. A variadic argument list keeps
// its ...; with nothing to evaluate, the call goes into the closure as it
// is: go f(1) -> ryield.Hook.Go(func() { f(1) }); and a call of a func() with
// no arguments goes as a value: go func() { ... }() ->
// ryield.Hook.Go(func() { ... }), go s.run() -> ryield.Hook.Go(s.run).
//
// It leaves a go statement of a builtin (go println(x)), of f(g()) with
// g's results as the arguments, with an untyped argument that is not a
// constant (a comparison, which := would make a bool), or whose text that
// must go into the closure spans lines.
func (r *rewriter) goStmt(s *ast.GoStmt, depth int) {
	call := s.Call
	if r.isBuiltin(call.Fun) {
		return
	}
	ft := r.info.TypeOf(call.Fun)
	if ft == nil {
		return
	}
	// The go keyword, with the blanks up to the function.
	goEnd := s.Go + 2
	if r.blankBetween(goEnd, call.Fun.Pos()) {
		goEnd = call.Fun.Pos()
	}

	if len(call.Args) == 0 && !call.Ellipsis.IsValid() && r.blankBetween(call.Lparen+1, call.Rparen) {
		if sig, ok := ft.Underlying().(*types.Signature); ok && sig.Params().Len() == 0 && sig.Results().Len() == 0 {
			r.replace(s.Go, goEnd, r.name+".Hook.Go(", depth)
			r.replace(call.Lparen, call.Rparen+1, ")", depth)
			r.points++
			return
		}
	}

	static := r.staticFunc(call.Fun)
	kinds := make([]int, len(call.Args))
	bound := !static
	for i, a := range call.Args {
		tv, ok := r.info.Types[a]
		if !ok {
			return
		}
		if _, ok := tv.Type.(*types.Tuple); ok {
			return // f(g())
		}
		switch {
		case tv.Value != nil || tv.IsNil() || r.staticFunc(a):
			kinds[i] = copyText
		case r.untyped(a):
			return
		default:
			kinds[i] = bind
			bound = true
		}
	}
	if !bound {
		r.replace(s.Go, goEnd, r.name+".Hook.Go(func() { ", depth)
		r.insert(call.End(), " })", depth, true)
		r.points++
		return
	}
	if static && !r.oneLine(call.Fun.Pos(), call.Fun.End()) {
		return
	}
	for i, a := range call.Args {
		if kinds[i] == copyText && !r.oneLine(a.Pos(), a.End()) {
			return
		}
	}
	// The commas between the arguments, and after the last one the
	// trailing comma and the ellipsis.
	commas := make([]int, len(call.Args))
	for i := 1; i < len(call.Args); i++ {
		at := r.punctuation(call.Args[i-1].End(), call.Args[i].Pos())
		if len(at) != 1 {
			return
		}
		commas[i] = at[0]
	}
	var trailing []int
	if n := len(call.Args); n > 0 {
		trailing = r.punctuation(call.Args[n-1].End(), call.Rparen)
	}

	var names, args []string
	callee := ""
	if static {
		callee = r.moveText(call.Fun, false)
	} else {
		callee = r.temp("f")
		names = append(names, callee)
	}
	for i, a := range call.Args {
		if kinds[i] == bind {
			n := r.temp(strconv.Itoa(i))
			names = append(names, n)
			args = append(args, n)
		} else {
			args = append(args, r.moveText(a, false))
		}
	}
	r.replace(s.Go, goEnd, "{ "+strings.Join(names, ", ")+" := ", depth)

	// The separators: a comma goes between two values that are bound, the
	// other separators go, with the blanks after them when no value is
	// bound before them; so go the blanks before an argument that goes
	// into the closure when one is.
	if len(call.Args) == 0 {
		r.replace(call.Lparen, call.Lparen+1, "", depth)
	} else {
		commas[0] = r.offset(call.Lparen)
	}
	before := !static // a value before the separator is bound
	for i := range call.Args {
		switch {
		case before && kinds[i] == bind && i == 0:
			sep := ", "
			if c := r.src[commas[0]+1]; c == ' ' || c == '\t' || c == '\n' || c == '\r' {
				sep = ","
			}
			r.replaceAt(commas[0], commas[0]+1, sep, depth)
		case before && kinds[i] == bind:
		case before:
			r.replaceAt(commas[i], commas[i]+1, "", depth)
			if at := r.offset(call.Args[i].Pos()); r.blankRun(at, -1) < at {
				r.replaceAt(r.blankRun(at, -1), at, "", depth)
			}
		default:
			r.replaceAt(commas[i], commas[i]+1, "", depth)
			if at := commas[i] + 1; r.blankRun(at, 1) > at {
				r.replaceAt(at, r.blankRun(at, 1), "", depth)
			}
		}
		before = before || kinds[i] == bind
	}
	for _, at := range trailing {
		size := 1
		if r.src[at] == '.' {
			size = 3
		}
		r.replaceAt(at, at+size, "", depth)
	}
	ellipsis := ""
	if call.Ellipsis.IsValid() {
		ellipsis = "..."
	}
	r.replace(call.Rparen, call.Rparen+1, "; "+r.name+".Hook.Go(func() { "+callee+"("+strings.Join(args, ", ")+ellipsis+") }) }", depth)
	r.points++
}

// blankRun returns the offset where the spaces and tabs from at end,
// going forward (dir 1) or back (dir -1).
func (r *rewriter) blankRun(at, dir int) int {
	if dir < 0 {
		for at > 0 && (r.src[at-1] == ' ' || r.src[at-1] == '\t') {
			at--
		}
		return at
	}
	for at < len(r.src) && (r.src[at] == ' ' || r.src[at] == '\t') {
		at++
	}
	return at
}

// blankBetween reports whether the text between from and to is spaces and
// tabs.
func (r *rewriter) blankBetween(from, to token.Pos) bool {
	return len(bytes.Trim(r.src[r.offset(from):r.offset(to)], " \t")) == 0
}

// oneLine reports whether the text between from and to has no newline.
func (r *rewriter) oneLine(from, to token.Pos) bool {
	return !bytes.ContainsAny(r.src[r.offset(from):r.offset(to)], "\n\r")
}

// punctuation returns the offsets of the commas and ellipses between from
// and to, where there are nothing else but blanks and comments.
func (r *rewriter) punctuation(from, to token.Pos) []int {
	var at []int
	src := r.src[:r.offset(to)]
	for i := r.offset(from); i < len(src); i++ {
		switch {
		case bytes.HasPrefix(src[i:], []byte("//")):
			for i < len(src) && src[i] != '\n' {
				i++
			}
		case bytes.HasPrefix(src[i:], []byte("/*")):
			end := bytes.Index(src[i+2:], []byte("*/"))
			if end < 0 {
				return at
			}
			i += 2 + end + 1
		case bytes.HasPrefix(src[i:], []byte("...")):
			at = append(at, i)
			i += 2
		case src[i] == ',':
			at = append(at, i)
		}
	}
	return at
}

// selectStmt rewrites a select statement with at least one communication
// to a switch on ryield.Select, and reports whether it did:
//
//	select {                 switch ryield_0, ryield_1, ryield_2 := ryield.R(a), ryield.S(b, x), ryield.R(c); ryield.Hook.Select(true, ryield_0, ryield_1, ryield_2) {
//	case v := <-a:           case 0: v := ryield_0.V;
//	case b <- x:       ->    case 1:
//	case w, ok = <-c:        case 2: w, ok = ryield_2.V, ryield_2.OK;
//	default:                 default:
//	}                        }
//
// The switch's init evaluates the channels and the values to send once,
// in their order, as the select did on entering; a break in a case
// breaks the switch as it broke the select, and a label stays on it.
// Without a default case, the last case is the switch's default (Select
// returns no -1 then), so that a select that ended a function still does.
// The channel and value expressions move to the switch's line, those of
// a case on another line after a /*line*/ directive that gives their
// position, and another one after them gives the select's position back,
// so that a panic in them still names their line.
//
// It leaves the select as it is (for a yield point before it) when it has
// no communication, or when a communication's expressions or its case's
// header span lines, a channel's type is a type parameter's, a send's
// element type cannot be spelled where S needs it, or a two-value receive
// assigns to a bool of another type.
func (r *rewriter) selectStmt(sel *ast.SelectStmt, depth int) bool {
	var comms []*ast.CommClause
	hasDefault := false
	for _, s := range sel.Body.List {
		cc, ok := s.(*ast.CommClause)
		if !ok {
			return false
		}
		if cc.Comm == nil {
			hasDefault = true
			continue
		}
		comms = append(comms, cc)
	}
	if len(comms) == 0 {
		return false
	}
	// Check every case before any edit.
	for _, cc := range comms {
		switch s := cc.Comm.(type) {
		case *ast.SendStmt:
			ch, ok := r.chanType(s.Chan)
			if !ok || !r.oneLine(cc.Case, cc.Colon+1) {
				return false
			}
			if _, ok := r.sendTypeArgs(ch, s.Value, sel.Pos()); !ok {
				return false
			}
		case *ast.ExprStmt:
			u, ok := ast.Unparen(s.X).(*ast.UnaryExpr)
			if !ok || u.Op != token.ARROW || !r.oneLine(cc.Case, cc.Colon+1) {
				return false
			}
			if _, ok := r.chanType(u.X); !ok {
				return false
			}
		case *ast.AssignStmt:
			if len(s.Rhs) != 1 || len(s.Lhs) > 2 || !r.oneLine(s.Rhs[0].Pos(), cc.Colon+1) {
				return false
			}
			u, ok := ast.Unparen(s.Rhs[0]).(*ast.UnaryExpr)
			if !ok || u.Op != token.ARROW {
				return false
			}
			if _, ok := r.chanType(u.X); !ok {
				return false
			}
			if len(s.Lhs) == 2 && s.Tok == token.ASSIGN && !isBlank(s.Lhs[1]) {
				okType := r.info.TypeOf(s.Lhs[1])
				if okType == nil || !types.AssignableTo(types.Typ[types.Bool], okType) {
					return false
				}
			}
		default:
			return false
		}
	}

	// A directive goes before a case's first expression when it is on
	// another line than the text before it.
	line := r.tf.Line(sel.Select)
	directive := func(pos token.Pos) string {
		if l := r.tf.Line(pos); l != line {
			line = l
			return r.lineDirective(pos)
		}
		return ""
	}
	var names, cases []string
	for i, cc := range comms {
		name := r.temp(strconv.Itoa(i))
		names = append(names, name)
		label := "case " + strconv.Itoa(i) + ":"
		if !hasDefault && i == len(comms)-1 {
			label = "default:"
		}
		switch s := cc.Comm.(type) {
		case *ast.SendStmt:
			ch, _ := r.chanType(s.Chan)
			targs, _ := r.sendTypeArgs(ch, s.Value, sel.Pos())
			cases = append(cases, r.name+".S"+targs+"("+directive(s.Chan.Pos())+r.moveText(s.Chan, true)+", "+r.moveText(s.Value, true)+")")
			r.replace(cc.Case, cc.Colon+1, label, depth)
		case *ast.ExprStmt:
			x := ast.Unparen(s.X).(*ast.UnaryExpr).X
			cases = append(cases, r.name+".R("+directive(x.Pos())+r.moveText(x, true)+")")
			r.replace(cc.Case, cc.Colon+1, label, depth)
		case *ast.AssignStmt:
			x := ast.Unparen(s.Rhs[0]).(*ast.UnaryExpr).X
			cases = append(cases, r.name+".R("+directive(x.Pos())+r.moveText(x, true)+")")
			r.replace(cc.Case, cc.Case+4, label, depth)
			value := name + ".V"
			if len(s.Lhs) == 2 {
				value += ", " + name + ".OK"
			}
			r.replace(s.Rhs[0].Pos(), cc.Colon+1, value+";", depth)
		}
	}
	list := strings.Join(names, ", ")
	header := "switch " + list + " := " + strings.Join(cases, ", ") + "; " +
		r.name + ".Hook.Select(" + strconv.FormatBool(hasDefault) + ", " + list + ")"
	if line != r.tf.Line(sel.Select) {
		header += r.lineDirective(sel.Select + 6)
	}
	r.replace(sel.Select, sel.Select+6, header, depth)
	return true
}

// lineDirective returns a /*line*/ directive that gives the text after it
// the position of pos.
func (r *rewriter) lineDirective(pos token.Pos) string {
	p := r.tf.PositionFor(pos, true)
	if p.Column > 0 {
		return fmt.Sprintf("/*line %s:%d:%d*/", p.Filename, p.Line, p.Column)
	}
	return fmt.Sprintf("/*line %s:%d*/", p.Filename, p.Line)
}
