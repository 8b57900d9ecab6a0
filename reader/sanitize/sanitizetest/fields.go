package sanitizetest

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Field is one plain-text field of a feed document: where it is (as in
// "rss/channel/item/title", "feed/entry/category@term",
// "items/tags") and its value as a reader decodes it.
type Field struct {
	Path, Value string
}

// xmlText are the elements of RSS 2.0 and Atom 1.0 whose text is plain
// text (with the element's path suffix): titles, categories, authors'
// names, dc:creator, the channel's description and subtitle, and Atom
// content of type text.
var xmlText = []string{"/title", "/category", "/creator", "/author/name", "/author", "channel/description", "feed/subtitle"}

// xmlAttrs are the plain-text attributes: Atom's category term and the
// reading's unit and sensor.
var xmlAttrs = map[string]bool{"term": true, "unit": true, "sensor": true}

// PlainFields returns the plain-text fields of an RSS, Atom or JSON Feed
// document.
func PlainFields(doc []byte) ([]Field, error) {
	if d := bytes.TrimSpace(doc); len(d) > 0 && d[0] == '{' {
		var v any
		if err := json.Unmarshal(doc, &v); err != nil {
			return nil, err
		}
		var out []Field
		jsonFields("", v, &out)
		return out, nil
	}
	return xmlFields(doc)
}

func xmlFields(doc []byte) ([]Field, error) {
	d := xml.NewDecoder(bytes.NewReader(doc))
	var (
		out   []Field
		stack []string
		text  []*strings.Builder
		plain []bool
	)
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			stack = append(stack, tok.Name.Local)
			path := strings.Join(stack, "/")
			isPlain := false
			for _, suffix := range xmlText {
				isPlain = isPlain || strings.HasSuffix(path, suffix)
			}
			for _, a := range tok.Attr {
				if xmlAttrs[a.Name.Local] {
					out = append(out, Field{path + "@" + a.Name.Local, a.Value})
				}
				if tok.Name.Local == "content" && a.Name.Local == "type" && a.Value == "text" {
					isPlain = true
				}
			}
			text = append(text, &strings.Builder{})
			plain = append(plain, isPlain)
		case xml.CharData:
			if len(text) > 0 {
				text[len(text)-1].Write(tok)
			}
		case xml.EndElement:
			if len(stack) == 0 {
				return nil, fmt.Errorf("unbalanced </%s>", tok.Name.Local)
			}
			n := len(stack) - 1
			if plain[n] {
				out = append(out, Field{strings.Join(stack, "/"), strings.TrimSpace(text[n].String())})
			}
			stack, text, plain = stack[:n], text[:n], plain[:n]
		}
	}
}

// jsonText are the JSON Feed members whose strings are plain text.
var jsonText = map[string]bool{
	"title": true, "summary": true, "content_text": true, "tags": true, "name": true,
	"description": true, "unit": true, "sensor": true,
}

func jsonFields(path string, v any, out *[]Field) {
	key := path[strings.LastIndexByte(path, '/')+1:]
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			jsonFields(path+"/"+k, x, out)
		}
	case []any:
		for _, x := range v {
			jsonFields(path, x, out)
		}
	case string:
		if jsonText[key] {
			*out = append(*out, Field{strings.TrimPrefix(path, "/"), v})
		}
	}
}
