package sanitizetest

import (
	_ "embed"
	"fmt"
	"html"
	"strings"

	nethtml "golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

//go:embed testdata/plaintext.txt
var valuesFile string

// Value is one line of testdata/plaintext.txt.
type Value struct {
	Name string
	// Text is the value as meant.
	Text string
	// Hostile values hold markup; the others are ordinary text that
	// every output must keep.
	Hostile bool
}

// Values returns the values of testdata/plaintext.txt.
func Values() []Value {
	var out []Value
	for line := range strings.Lines(valuesFile) {
		line = strings.TrimRight(line, "\n")
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		kind, rest, _ := strings.Cut(line, "\t")
		name, text, _ := strings.Cut(rest, "\t")
		out = append(out, Value{Name: name, Text: text, Hostile: kind == "hostile"})
	}
	return out
}

// Case is a value as a feed writes it in an element's content.
type Case struct {
	Value
	// Encoding names how XML escapes Text: "escaped" (once, as a feed
	// that means the text writes it), "double", "triple", "cdata",
	// "cdata-escaped", "numeric", "hex", "named-upper".
	Encoding string
	// XML is the element's content.
	XML string
	// Same reports whether a reader of the feed, reading the element as
	// HTML (as slogfeed reads titles), finds Text: every encoding but
	// "triple" and "cdata-escaped" for ordinary text, which read as
	// escaped text once more.
	Same bool
}

// Name is "value/encoding".
func (c Case) Name() string { return c.Value.Name + "/" + c.Encoding }

// Cases returns every value in every encoding.
func Cases() []Case {
	var out []Case
	for _, v := range Values() {
		for _, e := range encodings {
			xml, ok := e.encode(v.Text)
			if !ok {
				continue
			}
			out = append(out, Case{Value: v, Encoding: e.name, XML: xml, Same: e.same})
		}
	}
	return out
}

var encodings = []struct {
	name   string
	same   bool
	encode func(string) (string, bool)
}{
	{"escaped", true, func(s string) (string, bool) { return escape(s), true }},
	{"double", true, func(s string) (string, bool) { return escape(escape(s)), true }},
	{"triple", false, func(s string) (string, bool) { return escape(escape(escape(s))), true }},
	{"cdata", true, func(s string) (string, bool) {
		return "<![CDATA[" + s + "]]>", !strings.Contains(s, "]]>")
	}},
	{"cdata-escaped", false, func(s string) (string, bool) {
		return "<![CDATA[" + escape(escape(s)) + "]]>", true
	}},
	{"numeric", true, func(s string) (string, bool) {
		return escape(strings.NewReplacer("<", "&#60;", ">", "&#62;", `"`, "&#34;", "&", "&#38;").Replace(s)), true
	}},
	{"hex", true, func(s string) (string, bool) {
		return escape(strings.NewReplacer("<", "&#X3C;", ">", "&#x3E;", `"`, "&#x22;", "&", "&#X26;").Replace(s)), true
	}},
	{"named-upper", true, func(s string) (string, bool) {
		return escape(strings.NewReplacer("<", "&LT;", ">", "&GT;", `"`, "&QUOT;", "&", "&AMP;").Replace(s)), true
	}},
}

// escape escapes s for XML text: '&', '<' and '>'.
func escape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

// maxLevels is how many entity decodings of a value Check reads.
const maxLevels = 32

// Check returns an error when v, a value published in a plain-text field,
// would hold markup for a reader that renders the field as HTML after
// decoding its entities any number of times (up to 32): an element of
// golang.org/x/net/html's parse of the value, of the value followed by
// the '>' of the reader's own markup (an open tag with attributes), or an
// event-handler attribute when the value is put in a double-quoted
// attribute.
func Check(v string) error { return check(v, 0) }

func check(v string, depth int) error {
	for level := 0; level <= maxLevels; level++ {
		if err := checkLevel(v, depth); err != nil {
			return fmt.Errorf("%q after %d decodings: %w", v, level, err)
		}
		next := html.UnescapeString(v)
		if next == v {
			return nil
		}
		v = next
	}
	return fmt.Errorf("%q still decodes after %d decodings", v, maxLevels)
}

func checkLevel(v string, depth int) error {
	body := &nethtml.Node{Type: nethtml.ElementNode, Data: "div", DataAtom: atom.Div}
	nodes, err := nethtml.ParseFragment(strings.NewReader(v), body)
	if err != nil {
		return err
	}
	for _, n := range nodes {
		if err := noElement(n, false, depth); err != nil {
			return err
		}
	}
	if nodes, err = nethtml.ParseFragment(strings.NewReader(v+">"), body); err != nil {
		return err
	}
	for _, n := range nodes {
		if err := noElement(n, true, depth); err != nil {
			return fmt.Errorf("followed by '>': %w", err)
		}
	}
	doc, err := nethtml.Parse(strings.NewReader(`<a title="` + v + `">x</a>`))
	if err != nil {
		return err
	}
	return noHandler(doc)
}

// noElement fails on an element in n and on a comment whose text holds
// markup; with attrOnly (the value followed by '>', whose comments the
// first pass has read), only on an element with attributes or one that
// takes over what follows it (a script, a style, foreign content…).
func noElement(n *nethtml.Node, attrOnly bool, depth int) error {
	switch n.Type {
	case nethtml.ElementNode:
		if !attrOnly || len(n.Attr) > 0 || takesOver(n.Data) {
			return fmt.Errorf("element <%s %v>", n.Data, n.Attr)
		}
	case nethtml.CommentNode:
		if !attrOnly && depth < 2 {
			if err := check(n.Data, depth+1); err != nil {
				return fmt.Errorf("comment: %w", err)
			}
		}
	}
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		if err := noElement(c, attrOnly, depth); err != nil {
			return err
		}
	}
	return nil
}

// noHandler fails on an event handler: an attribute with a value whose
// name is "on" and letters.
func noHandler(n *nethtml.Node) error {
	for _, a := range n.Attr {
		if handlerName(a.Key) && a.Val != "" {
			return fmt.Errorf("in a quoted attribute: event handler %s=%q", a.Key, a.Val)
		}
	}
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		if err := noHandler(c); err != nil {
			return err
		}
	}
	return nil
}

func handlerName(k string) bool {
	rest, ok := strings.CutPrefix(k, "on")
	return ok && rest != "" && strings.Trim(rest, "abcdefghijklmnopqrstuvwxyz") == ""
}

// takesOver reports the elements whose start tag alone changes how a
// page reads what comes after it.
func takesOver(name string) bool {
	switch name {
	case "script", "style", "textarea", "title", "xmp", "iframe", "noembed", "noframes",
		"noscript", "plaintext", "svg", "math", "template", "object", "embed", "base", "meta", "link", "form":
		return true
	}
	return false
}
