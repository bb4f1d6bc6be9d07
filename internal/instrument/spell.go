package instrument

import (
	"go/token"
	"go/types"
	"iter"
)

// spell returns Go source for type t that means t at pos in the file, and
// false when there is none: t names an unexported type of another package,
// a package the file does not import, or a name shadowed at pos.
func (r *rewriter) spell(t types.Type, pos token.Pos) (string, bool) {
	scope := r.pkg.Scope().Innermost(pos)
	if scope == nil {
		return "", false
	}
	ok := true
	qualify := func(p *types.Package) string {
		if p == r.pkg {
			return ""
		}
		for _, imp := range r.file.Imports {
			pn := r.info.PkgNameOf(imp)
			if pn == nil || pn.Imported() != p || pn.Name() == "_" || pn.Name() == "." {
				continue
			}
			if _, obj := scope.LookupParent(pn.Name(), pos); obj == pn {
				return pn.Name()
			}
		}
		ok = false
		return ""
	}
	s := types.TypeString(t, qualify)
	if !ok || !r.spellable(t, scope, pos) {
		return "", false
	}
	return s, true
}

// spellable reports whether every name in t can be written at pos: a
// type of another package must be exported, and a type of this package or
// the universe must not be shadowed. Struct fields and interface methods
// of other packages must be exported, or the spelled type would be another
// type.
func (r *rewriter) spellable(t types.Type, scope *types.Scope, pos token.Pos) bool {
	visible := func(obj types.Object) bool {
		if obj.Pkg() != nil && obj.Pkg() != r.pkg {
			return obj.Exported()
		}
		_, found := scope.LookupParent(obj.Name(), pos)
		return found == obj
	}
	typesOK := func(vars iter.Seq[*types.Var]) bool {
		for v := range vars {
			if !r.spellable(v.Type(), scope, pos) {
				return false
			}
		}
		return true
	}
	switch t := t.(type) {
	case *types.Basic:
		if t.Kind() == types.UnsafePointer || t.Info()&types.IsUntyped != 0 {
			return false
		}
		return visible(types.Universe.Lookup(t.Name()))
	case *types.Named:
		return visible(t.Obj()) && r.allSpellable(t.TypeArgs().Types(), scope, pos)
	case *types.Alias:
		return visible(t.Obj()) && r.allSpellable(t.TypeArgs().Types(), scope, pos)
	case *types.TypeParam:
		return visible(t.Obj())
	case *types.Pointer:
		return r.spellable(t.Elem(), scope, pos)
	case *types.Slice:
		return r.spellable(t.Elem(), scope, pos)
	case *types.Array:
		return r.spellable(t.Elem(), scope, pos)
	case *types.Chan:
		return r.spellable(t.Elem(), scope, pos)
	case *types.Map:
		return r.spellable(t.Key(), scope, pos) && r.spellable(t.Elem(), scope, pos)
	case *types.Signature:
		return typesOK(t.Params().Variables()) && typesOK(t.Results().Variables())
	case *types.Struct:
		for f := range t.Fields() {
			if !f.Exported() && f.Pkg() != r.pkg {
				return false
			}
		}
		return typesOK(t.Fields())
	case *types.Interface:
		for m := range t.ExplicitMethods() {
			if !m.Exported() && m.Pkg() != r.pkg || !r.spellable(m.Type(), scope, pos) {
				return false
			}
		}
		return r.allSpellable(t.EmbeddedTypes(), scope, pos)
	}
	return false
}

func (r *rewriter) allSpellable(ts iter.Seq[types.Type], scope *types.Scope, pos token.Pos) bool {
	for t := range ts {
		if !r.spellable(t, scope, pos) {
			return false
		}
	}
	return true
}
