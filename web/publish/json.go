package publish

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"

	"github.com/gorilla/feeds"

	"github.com/slogfeed/slogfeed/feedext"
	"github.com/slogfeed/slogfeed/reader/sanitize"
)

// jsonDoc is gorilla/feeds' JSONFeed with slogfeed's items; its "items"
// is always present, as JSON Feed requires (gorilla omits it when empty).
type jsonDoc struct {
	*feeds.JSONFeed
	Items []*jsonItem `json:"items"`
	// NextURL is JSON Feed's next_url: the page of older items.
	NextURL string `json:"next_url,omitempty"`
}

// jsonItem adds the reading extension to gorilla's item.
type jsonItem struct {
	*feeds.JSONItem
	Reading *jsonReading `json:"_slogfeed,omitempty"`
}

// jsonReading is the "_slogfeed" object, written with feedext's keys.
type jsonReading xmlReading

// MarshalJSON writes the object's members in feedext's order.
func (r *jsonReading) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	member := func(key string, v any) error {
		if b.Len() > 1 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(key)
		b.Write(k)
		b.WriteByte(':')
		val, err := json.Marshal(v)
		if err != nil {
			return err
		}
		b.Write(val)
		return nil
	}
	if err := member(feedext.AttrValue, json.Number(FormatValue(r.Value))); err != nil {
		return nil, err
	}
	if r.Unit != "" {
		_ = member(feedext.AttrUnit, r.Unit)
	}
	if r.Sensor != "" {
		_ = member(feedext.AttrSensor, r.Sensor)
	}
	if !r.Time.IsZero() {
		_ = member(feedext.AttrTime, formatTime(r.Time))
	}
	if r.Lat != nil && r.Lon != nil {
		_ = member(feedext.AttrLat, json.Number(FormatValue(*r.Lat)))
		_ = member(feedext.AttrLon, json.Number(FormatValue(*r.Lon)))
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// JSON renders f as a JSON Feed 1.1 document.
func JSON(f Feed) ([]byte, error) {
	p, err := prepare(f)
	if err != nil {
		return nil, err
	}
	jf := (&feeds.JSON{Feed: gorillaFeed(p)}).JSONFeed()
	jf.FeedUrl = p.self
	jf.HomePageUrl = p.link
	if p.hub != "" {
		jf.Hubs = []*feeds.JSONHub{{Type: "WebSub", Url: p.hub}}
	}
	doc := &jsonDoc{JSONFeed: jf, Items: make([]*jsonItem, 0, len(jf.Items)), NextURL: p.next}
	for i, ji := range jf.Items {
		e := &p.entries[i]
		pub, upd := e.published, e.updated
		ji.PublishedDate = &pub
		ji.ModifiedDate = nil
		if !upd.Equal(pub) {
			ji.ModifiedDate = &upd
		}
		// JSON Feed wants content_html or content_text, and a plain-text
		// summary only when it says something the content does not.
		ji.Summary = ""
		switch {
		case e.content != "":
			ji.ContentHTML = e.content
			if e.summary != "" {
				ji.Summary = sanitize.PlainText(e.summary, 0)
			}
		case e.summary != "":
			ji.ContentHTML = e.summary
		default:
			ji.ContentText = e.title
		}
		ji.Tags = e.categories
		for _, enc := range e.enclosures {
			mt := enc.Type
			if mt == "" {
				mt = "application/octet-stream" // JSON Feed requires a MIME type
			}
			ji.Attachments = append(ji.Attachments, feeds.JSONAttachment{
				Url: enc.URL, MIMEType: mt, Size: int32(min(max(enc.Length, 0), math.MaxInt32)),
			})
		}
		it := &jsonItem{JSONItem: ji}
		if e.reading != nil {
			it.Reading = (*jsonReading)(e.reading)
		}
		doc.Items = append(doc.Items, it)
	}
	jf.Items = nil
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return nil, fmt.Errorf("publish: encoding JSON: %w", err)
	}
	return b.Bytes(), nil
}
