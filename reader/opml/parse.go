package opml

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"

	"golang.org/x/net/html/charset"

	"github.com/slogfeed/slogfeed/reader/sanitize"
)

// maxReported is how many *OutlineError values Parse keeps; further skipped
// outlines are only counted.
const maxReported = 100

// Parse reads an OPML document from r and returns its subscriptions in
// document order, each URL once (the first outline with a URL wins; URLs
// that differ only in the case of the scheme or host are the same).
//
// If the document cannot be read, Parse returns nil and an error matching
// ErrMalformed, ErrCharset, ErrTooLarge, ErrTooDeep, ErrTooManyOutlines or
// ErrNotOPML (or the reader's own error). Otherwise it returns every
// subscription it could import; if it had to leave some out (a URL that is
// not http or https, see ErrUnsupportedURL), the error is non-nil as well:
// it is the errors.Join of one *OutlineError per skipped outline (at most
// 100, then a count of the rest) and matches ErrSkipped. The import is
// still good in that case; report the error to the user.
//
// Titles, folder names and URLs have surrounding white space removed. An
// htmlUrl that is not an http or https URL is dropped without error.
func Parse(r io.Reader) ([]Outline, error) {
	lr := &limitedReader{r: r, n: MaxSize}
	var charsetErr error
	d := xml.NewDecoder(lr)
	d.Strict = true
	d.Entity = nil
	d.CharsetReader = func(label string, in io.Reader) (io.Reader, error) {
		cr, err := charset.NewReaderLabel(label, in)
		if err != nil {
			charsetErr = fmt.Errorf("%w: %q: %w", ErrCharset, label, err)
		}
		return cr, err
	}

	p := parser{dec: d, seen: make(map[string]int)}
	err := p.run()
	switch {
	case lr.tooLarge:
		return nil, fmt.Errorf("%w: more than %d bytes", ErrTooLarge, MaxSize)
	case charsetErr != nil:
		return nil, charsetErr
	case err != nil:
		return nil, err
	}
	var errs []error
	for _, e := range p.skipped {
		errs = append(errs, e)
	}
	if p.unreported > 0 {
		errs = append(errs, fmt.Errorf("%w: %d more outlines not listed", ErrSkipped, p.unreported))
	}
	return p.out, errors.Join(errs...)
}

// frame is one open element.
type frame struct {
	kind     elemKind
	depth    int      // outline nesting depth; 0 outside outlines
	category []string // category path for outlines inside this element
}

type elemKind uint8

const (
	elemOther elemKind = iota
	elemOPML
	elemBody
	elemOutline
)

type parser struct {
	dec        *xml.Decoder
	stack      []frame
	outlines   int
	out        []Outline
	seen       map[string]int // feed URL key → its outline in out
	skipped    []*OutlineError
	unreported int
}

func (p *parser) run() error {
	rooted := false
	for {
		tok, err := p.dec.Token()
		if errors.Is(err, io.EOF) {
			if !rooted {
				return fmt.Errorf("%w: no root element", ErrNotOPML)
			}
			return nil
		}
		if err != nil {
			var syn *xml.SyntaxError
			if errors.As(err, &syn) {
				return fmt.Errorf("%w: %w", ErrMalformed, err)
			}
			return fmt.Errorf("opml: reading document: %w", err)
		}
		switch t := tok.(type) {
		case xml.CharData:
			if !rooted && len(bytes.TrimSpace(bytes.TrimPrefix(t, []byte("\ufeff")))) > 0 {
				return fmt.Errorf("%w: text before any element (it is not an XML document)", ErrNotOPML)
			}
		case xml.StartElement:
			if len(p.stack) >= MaxDepth+2 {
				return fmt.Errorf("%w: elements nest more than %d deep", ErrTooDeep, MaxDepth+2)
			}
			if len(p.stack) == 0 {
				if rooted {
					return fmt.Errorf("%w: more than one root element", ErrMalformed)
				}
				if t.Name.Local != "opml" {
					return fmt.Errorf("%w: root element is <%s>", ErrNotOPML, t.Name.Local)
				}
				rooted = true
				p.stack = append(p.stack, frame{kind: elemOPML})
				continue
			}
			if err := p.start(t); err != nil {
				return err
			}
		case xml.EndElement:
			// The decoder checks that end tags match start tags.
			p.stack = p.stack[:len(p.stack)-1]
		}
	}
}

// start handles a start element below the root.
func (p *parser) start(t xml.StartElement) error {
	parent := p.stack[len(p.stack)-1]
	switch {
	case parent.kind == elemOPML && t.Name.Local == "body":
		p.stack = append(p.stack, frame{kind: elemBody})
		return nil
	case (parent.kind == elemBody || parent.kind == elemOutline) && t.Name.Local == "outline":
	default:
		p.stack = append(p.stack, frame{kind: elemOther})
		return nil
	}

	p.outlines++
	if p.outlines > MaxOutlines {
		return fmt.Errorf("%w: more than %d", ErrTooManyOutlines, MaxOutlines)
	}
	depth := parent.depth + 1
	if depth > MaxDepth {
		return fmt.Errorf("%w: outlines nest more than %d deep", ErrTooDeep, MaxDepth)
	}

	var title, text, xmlURL, htmlURL, category string
	var settings Settings
	var ignored []IgnoredSetting
	for _, a := range t.Attr {
		if a.Name.Space == Namespace {
			if why := settings.readSetting(a.Name.Local, a.Value); why != "" {
				ignored = append(ignored, IgnoredSetting{Attr: a.Name.Local, Value: sanitize.Clip(a.Value, MaxIgnoredValue), Reason: why})
			}
			continue
		}
		if a.Name.Space != "" {
			continue // xmlns declarations, miniflux:*, frss:*, …
		}
		switch {
		case strings.EqualFold(a.Name.Local, "title"):
			title = strings.TrimSpace(a.Value)
		case strings.EqualFold(a.Name.Local, "text"):
			text = strings.TrimSpace(a.Value)
		case strings.EqualFold(a.Name.Local, "xmlUrl"):
			xmlURL = strings.TrimSpace(a.Value)
		case strings.EqualFold(a.Name.Local, "htmlUrl"):
			htmlURL = strings.TrimSpace(a.Value)
		case strings.EqualFold(a.Name.Local, "category"):
			category = a.Value
		}
	}
	if title == "" {
		title = text
	}

	if xmlURL == "" {
		// A folder: its title extends the path of what it contains.
		path := parent.category
		if title != "" {
			path = appendPath(path, title)
		}
		p.stack = append(p.stack, frame{kind: elemOutline, depth: depth, category: path})
		return nil
	}

	// A subscription. Outlines nested inside it (not usual) belong to the
	// same folder as it does.
	p.stack = append(p.stack, frame{kind: elemOutline, depth: depth, category: parent.category})
	key, err := checkURL(xmlURL)
	if err != nil {
		p.skip(xmlURL, err)
		return nil
	}
	if i, dup := p.seen[key]; dup {
		p.out[i].Duplicates++
		return nil
	}
	p.seen[key] = len(p.out)
	if _, err := checkURL(htmlURL); err != nil {
		htmlURL = ""
	}
	ignored = append(ignored, settings.finish()...)
	p.out = append(p.out, Outline{
		URL:      xmlURL,
		Title:    title,
		Site:     htmlURL,
		Category: withCategoryAttr(parent.category, category),
		Settings: settings,
		Ignored:  ignored,
	})
	return nil
}

func (p *parser) skip(rawURL string, reason error) {
	if len(p.skipped) >= maxReported {
		p.unreported++
		return
	}
	if len(rawURL) > 200 {
		rawURL = rawURL[:200] + "…"
	}
	line, _ := p.dec.InputPos()
	p.skipped = append(p.skipped, &OutlineError{Line: line, URL: rawURL, Err: reason})
}

// appendPath returns path+name in a new slice, so that sibling folders never
// share a backing array.
func appendPath(path []string, names ...string) []string {
	out := make([]string, 0, len(path)+len(names))
	out = append(out, path...)
	return append(out, names...)
}

// withCategoryAttr returns the folder path followed by the names in an OPML
// 2.0 category attribute: comma-separated, slash-delimited paths ("/a/b,c").
// Names already in the result are not repeated, and the result holds at most
// MaxDepth-1 names, so that Write can nest it. It returns nil for no names.
func withCategoryAttr(path []string, attr string) []string {
	out := appendPath(path)
	for _, cat := range strings.Split(attr, ",") {
		for _, name := range strings.Split(cat, "/") {
			name = strings.TrimSpace(name)
			if name == "" || len(out) >= MaxDepth-1 || contains(out, name) {
				continue
			}
			out = append(out, name)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// checkURL reports whether raw is an absolute http or https URL with a host,
// no longer than MaxURLLength, and returns the key used to find duplicates:
// the URL with its scheme and host in lower case.
func checkURL(raw string) (string, error) {
	if raw == "" || len(raw) > MaxURLLength {
		return "", ErrUnsupportedURL
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrUnsupportedURL, err)
	}
	scheme := strings.ToLower(u.Scheme)
	if (scheme != "http" && scheme != "https") || u.Host == "" || u.Opaque != "" {
		return "", ErrUnsupportedURL
	}
	u.Scheme = scheme
	u.Host = strings.ToLower(u.Host)
	return u.String(), nil
}

// limitedReader reads at most n bytes from r and then fails with
// ErrTooLarge if r holds more.
type limitedReader struct {
	r        io.Reader
	n        int64
	tooLarge bool
}

func (l *limitedReader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if l.n <= 0 {
		var probe [1]byte
		n, err := io.ReadFull(l.r, probe[:])
		if n > 0 {
			l.tooLarge = true
			return 0, ErrTooLarge
		}
		return 0, err
	}
	if int64(len(p)) > l.n {
		p = p[:l.n]
	}
	n, err := l.r.Read(p)
	l.n -= int64(n)
	return n, err
}
