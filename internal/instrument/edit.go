package instrument

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
)

// An edit replaces src[start:end] with text; start == end is an insertion.
// No edit's text holds a newline, so no edit moves a line.
//
// Edits of nested nodes may share an offset: the call that wraps an
// argument opens where the argument starts, and so may the argument's own
// rewrite. depth is the nesting of the node an edit belongs to, and close
// says the edit comes after that node's text, so that at one offset the
// outer node opens first and closes last.
type edit struct {
	start, end int
	text       string
	depth      int
	close      bool
}

// apply returns src with the edits made. Edits must not overlap; name is
// the file's, for the error if they do.
func apply(name string, src []byte, edits []edit) ([]byte, error) {
	edits = slices.Clone(edits)
	slices.SortStableFunc(edits, compareEdits)
	var out bytes.Buffer
	out.Grow(len(src) + 64*len(edits))
	at := 0
	for _, e := range edits {
		if e.start < at || e.end < e.start || e.end > len(src) {
			return nil, fmt.Errorf("instrument: %s: overlapping edits at offset %d", name, e.start)
		}
		out.Write(src[at:e.start])
		out.WriteString(e.text)
		at = e.end
	}
	out.Write(src[at:])
	return out.Bytes(), nil
}

// compareEdits orders edits by offset; at one offset, the text after nodes
// that end there (innermost first), then the text before nodes that start
// there (outermost first), then a replacement of the text that starts there.
func compareEdits(a, b edit) int {
	if a.start != b.start {
		return a.start - b.start
	}
	if rank(a) != rank(b) {
		return rank(a) - rank(b)
	}
	if a.close {
		return b.depth - a.depth
	}
	return a.depth - b.depth
}

func rank(e edit) int {
	switch {
	case e.close:
		return 0
	case e.start == e.end:
		return 1
	default:
		return 2
	}
}

// A move takes the text of a node, with the edits made inside it, to
// another edit's text: the go and select rewrites copy a constant argument
// into a closure, or a channel expression up to a switch statement's
// header. The edit that receives it holds key in its text until
// resolveMoves puts the text there.
type move struct {
	start, end int
	key        string
	// depth is the node's, set when the walk visits it: an insertion at
	// start or end belongs inside when it is the node's or a descendant's.
	depth int
	// covered says another edit replaces the node's text: the move
	// removes none of it itself.
	covered bool
}

// holds reports whether e is an edit of m's node or of its descendants.
func (m *move) holds(e edit) bool {
	if e.start < m.start || e.end > m.end {
		return false
	}
	if e.start == e.end && (e.start == m.start || e.start == m.end) {
		return e.depth >= m.depth && (e.close == (e.start == m.end))
	}
	return true
}

// resolveMoves puts the text of each move, its edits made, into the edit
// that holds its key, and removes the node's text (unless covered) and its
// edits from their place. A move inside another is resolved first, so an
// edit that holds a key is final before a move takes it.
func resolveMoves(name string, src []byte, edits []edit, moves []*move) ([]edit, error) {
	moves = slices.Clone(moves)
	slices.SortStableFunc(moves, func(a, b *move) int { return (a.end - a.start) - (b.end - b.start) })
	for _, m := range moves {
		var inner, rest []edit
		for _, e := range edits {
			if m.holds(e) {
				e.start -= m.start
				e.end -= m.start
				inner = append(inner, e)
			} else {
				rest = append(rest, e)
			}
		}
		text, err := apply(name, src[m.start:m.end], inner)
		if err != nil {
			return nil, err
		}
		found := false
		for i := range rest {
			if strings.Contains(rest[i].text, m.key) {
				rest[i].text = strings.Replace(rest[i].text, m.key, string(text), 1)
				found = true
				break
			}
		}
		if !found {
			return nil, fmt.Errorf("instrument: %s: no edit takes the text at offset %d", name, m.start)
		}
		if !m.covered {
			rest = append(rest, edit{start: m.start, end: m.end, depth: m.depth})
		}
		edits = rest
	}
	return edits, nil
}
