package transform

import (
	"fmt"
	"unicode/utf8"
	"unsafe"

	"github.com/slogfeed/slogfeed/storage"
)

// Fixed sizes ItemBytes counts besides an item's text.
const (
	itemSize      = int64(unsafe.Sizeof(storage.Item{}))
	stringSize    = int64(unsafe.Sizeof(""))
	enclosureSize = int64(unsafe.Sizeof(storage.Enclosure{}))
	readingSize   = int64(unsafe.Sizeof(storage.Reading{}))
	digestSize    = int64(unsafe.Sizeof(storage.Digest{}))
)

// ItemBytes is what an item counts against a run's byte budget: the item
// itself and every byte of text it holds. Items on different edges share
// their text, so the count is an upper bound of the memory a node's
// output takes, and exactly what encoding it (a preview, a stored item)
// makes.
func ItemBytes(it *Item) int64 {
	n := itemSize + int64(len(it.ID)+len(it.GUID)+len(it.Link)+len(it.Title)+len(it.Summary)+len(it.Content)+len(it.Author))
	for _, c := range it.Categories {
		n += stringSize + int64(len(c))
	}
	for _, e := range it.Enclosures {
		n += enclosureSize + int64(len(e.URL)+len(e.Type))
	}
	if r := it.Reading; r != nil {
		n += readingSize + int64(len(r.Unit)+len(r.Sensor))
	}
	if d := it.Digest; d != nil {
		n += digestSize + int64(len(d.Field))
		for _, id := range d.Items {
			n += stringSize + int64(len(id))
		}
	}
	return n
}

// itemsBytes is ItemBytes summed over items.
func itemsBytes(items []Item) int64 {
	var n int64
	for i := range items {
		n += ItemBytes(&items[i])
	}
	return n
}

// budget counts what a run materialises against Limits.MaxNodeBytes and
// Limits.MaxRunBytes.
type budget struct {
	lim   Limits
	total int64
}

// add counts one node's output; the error wraps ErrByteLimit and names
// the limit (the caller names the node).
func (b *budget) add(items []Item) error {
	n := itemsBytes(items)
	b.total += n
	if n > b.lim.MaxNodeBytes {
		return fmt.Errorf("%w: the node's output is %d bytes, at most %d (max_node_bytes)", ErrByteLimit, n, b.lim.MaxNodeBytes)
	}
	if b.total > b.lim.MaxRunBytes {
		return fmt.Errorf("%w: the run has materialised %d bytes by this node, at most %d (max_run_bytes)", ErrByteLimit, b.total, b.lim.MaxRunBytes)
	}
	return nil
}

// Grow counts n bytes of text an operator makes while it runs (a
// template's output, replaced text) against the node's byte budget, so
// that an operator that multiplies its input stops before it holds more
// than Limits.MaxNodeBytes; the error wraps ErrByteLimit.
func (c *Context) Grow(n int) error {
	if c == nil {
		return nil
	}
	c.made += int64(n)
	if max := c.Limits.MaxNodeBytes; max > 0 && c.made > max {
		return fmt.Errorf("%w: the node made %d bytes of text, at most %d (max_node_bytes)", ErrByteLimit, c.made, max)
	}
	return nil
}

// RegexInput returns the part of s a regular expression of this run may
// look at: its first Limits.MaxRegexInput bytes, cut at a character
// boundary. Regex operators match within it and keep s[len(RegexInput(s)):]
// as it is.
func (c *Context) RegexInput(s string) string {
	max := DefaultLimits.MaxRegexInput
	if c != nil && c.Limits.MaxRegexInput > 0 {
		max = c.Limits.MaxRegexInput
	}
	return CutUTF8(s, max)
}

// CutUTF8 returns the longest prefix of s of at most n bytes that does
// not split a UTF-8 sequence.
func CutUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	if n <= 0 {
		return ""
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
