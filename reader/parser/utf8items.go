package parser

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
)

// This file finds which items held the invalid UTF-8 bytes a document's
// repair replaced, so that Repairs.UTF8Items names them and a feed counts
// each such item once, as it counts an item with a bad date.

// xmlUTF8Items returns, for each item element the feed parser reads (those
// of spans that seen does not skip, in order), whether its bytes held
// invalid UTF-8 in orig, the document before its repair. spans and hashes
// are the repaired document's item elements and their hashes. orig is
// scanned again with each invalid byte read as '?', which keeps every
// offset, and its item elements are matched to spans in order. It returns
// nil when orig is valid UTF-8 or the two scans do not find the same
// number of items. What the repair strips and the tokenizer refuses (C0
// control characters, U+FFFE and U+FFFF, references to characters XML
// forbids) is read as spaces, which keeps every offset too.
func xmlUTF8Items(orig []byte, spans []span, hashes []uint64, seen func(uint64) bool, maxItems int) []bool {
	if utf8.Valid(orig) {
		return nil
	}
	marked := make([]byte, len(orig))
	var bad []int // offsets of invalid bytes, increasing
	for i := 0; i < len(orig); {
		r, size := utf8.DecodeRune(orig[i:])
		switch {
		case r == utf8.RuneError && size <= 1:
			marked[i] = '?'
			bad = append(bad, i)
		case r < 0x20 && r != '\t' && r != '\n' && r != '\r', r == 0xfffe, r == 0xffff:
			copy(marked[i:i+size], "   ")
		default:
			copy(marked[i:], orig[i:i+size])
		}
		i += size
	}
	if bytes.Contains(marked, []byte("&#")) {
		for _, m := range charRefRe.FindAllIndex(marked, -1) {
			if !xmlChar(marked[m[0]:m[1]]) {
				copy(marked[m[0]:m[1]], bytes.Repeat([]byte{' '}, m[1]-m[0]))
			}
		}
	}
	sc, err := scanXML(marked, maxItems)
	if err != nil || len(sc.items) != len(spans) {
		return nil
	}
	out := make([]bool, 0, len(spans))
	j := 0
	for i, sp := range sc.items {
		for j < len(bad) && bad[j] < sp.start {
			j++
		}
		if seen != nil && seen(hashes[i]) {
			continue
		}
		out = append(out, j < len(bad) && bad[j] < sp.end)
	}
	return out
}

// jsonUTF8Items returns, for each item of a JSON Feed, whether its bytes
// held invalid UTF-8.
func jsonUTF8Items(items []json.RawMessage) []bool {
	var out []bool
	for i, raw := range items {
		if !utf8.Valid(raw) {
			if out == nil {
				out = make([]bool, len(items))
			}
			out[i] = true
		}
	}
	return out
}
