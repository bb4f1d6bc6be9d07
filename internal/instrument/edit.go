package instrument

import (
	"bytes"
	"fmt"
	"slices"
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
