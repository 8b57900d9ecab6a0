package opml

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/slogfeed/slogfeed/schedule"
	"github.com/slogfeed/slogfeed/storage"
)

// Namespace is the XML namespace of slogfeed's outline attributes, which
// keep a subscription's slogfeed settings (see Settings); Prefix is the
// prefix Write declares for it (Parse matches the namespace, whatever
// its prefix).
const (
	Namespace = "https://slogfeed.org/ns/opml/1"
	Prefix    = "slogfeed"
)

// Bounds of the settings Parse reads: longer values are ignored.
const (
	// MaxSettingText bounds a text setting (policy, source type, unit).
	MaxSettingText = 256
	// MaxSettingJSON bounds a JSON setting (source config, reduce) and
	// an extract rule's regular expression, in bytes.
	MaxSettingJSON = 64 << 10
)

// Settings are what slogfeed keeps of a subscription besides its URL,
// title, site and category. Write puts them into attributes of Namespace
// on the subscription's outline:
//
//	slogfeed:policy="fixed-5s"          scheduling policy
//	slogfeed:weight="2.5"               best-effort weight
//	slogfeed:ignoreCache="true"         Cache-Control is no lower bound
//	slogfeed:source="ulb"               source adapter
//	slogfeed:sourceConfig="{…}"         its configuration (JSON)
//	slogfeed:extractField="title"       extract rule: field,
//	slogfeed:extractRegex="…"           regular expression,
//	slogfeed:extractUnit="C"            unit
//	slogfeed:retentionItems="500"       retention: items kept,
//	slogfeed:retentionAge="720h0m0s"    age kept
//	slogfeed:reduce="{…}"               PACK reduction policy (JSON)
//	slogfeed:sleep="22:00-06:00"        the user's sleep windows (schedule.ParseSleep's form)
//
// Parse reads them back. A value it cannot use (not a number, invalid
// JSON, too long) is ignored, and the subscription imports without it;
// whoever subscribes checks the rest (an unknown policy, a bad source
// configuration) as for any subscription.
type Settings struct {
	Policy      string
	Weight      float64
	IgnoreCache bool
	Source      *storage.SourceSpec
	Extract     *storage.ExtractRule
	Retention   storage.Retention
	Reduce      json.RawMessage
	// Sleep holds the user's own sleep windows (Daily and Windows; the
	// publisher's skipHours/skipDays are learned again from the feed).
	Sleep schedule.SleepPlan
}

// IsZero reports whether s holds no setting.
func (s Settings) IsZero() bool {
	return s.Policy == "" && s.Weight == 0 && !s.IgnoreCache && s.Source == nil && s.Extract == nil &&
		s.Retention == (storage.Retention{}) && len(s.Reduce) == 0 && len(s.Sleep.Daily) == 0 && len(s.Sleep.Windows) == 0
}

// attrs returns the attributes Write puts on an outline for s.
func (s Settings) attrs() []xml.Attr {
	var out []xml.Attr
	add := func(name, v string) {
		if v = cleanText(v); v != "" {
			out = append(out, xml.Attr{Name: xml.Name{Local: Prefix + ":" + name}, Value: v})
		}
	}
	add("policy", s.Policy)
	if s.Weight > 0 {
		add("weight", strconv.FormatFloat(s.Weight, 'g', -1, 64))
	}
	if s.IgnoreCache {
		add("ignoreCache", "true")
	}
	if s.Source != nil {
		add("source", s.Source.Type)
		add("sourceConfig", compactJSON(s.Source.Config))
	}
	if s.Extract != nil {
		add("extractField", s.Extract.Field)
		add("extractRegex", s.Extract.Regex)
		add("extractUnit", s.Extract.Unit)
	}
	if s.Retention.MaxItems > 0 {
		add("retentionItems", strconv.Itoa(s.Retention.MaxItems))
	}
	if s.Retention.MaxAge > 0 {
		add("retentionAge", s.Retention.MaxAge.String())
	}
	add("reduce", compactJSON(s.Reduce))
	add("sleep", s.Sleep.SleepText())
	return out
}

func compactJSON(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return ""
	}
	return b.String()
}

// readSetting reads one attribute of Namespace into s; values it cannot
// use are ignored.
func (s *Settings) readSetting(name, v string) {
	v = strings.TrimSpace(v)
	text := func() (string, bool) { return v, v != "" && len(v) <= MaxSettingText && utf8.ValidString(v) }
	raw := func() (json.RawMessage, bool) {
		if v == "" || len(v) > MaxSettingJSON {
			return nil, false
		}
		var b bytes.Buffer
		if err := json.Compact(&b, []byte(v)); err != nil {
			return nil, false // not JSON
		}
		return json.RawMessage(b.Bytes()), true
	}
	switch name {
	case "policy":
		if t, ok := text(); ok {
			s.Policy = t
		}
	case "weight":
		if w, err := strconv.ParseFloat(v, 64); err == nil && w > 0 && !math.IsInf(w, 0) {
			s.Weight = w
		}
	case "ignoreCache":
		s.IgnoreCache, _ = strconv.ParseBool(v)
	case "source":
		if t, ok := text(); ok {
			s.source().Type = t
		}
	case "sourceConfig":
		if r, ok := raw(); ok {
			s.source().Config = r
		}
	case "extractField":
		if t, ok := text(); ok {
			s.extract().Field = t
		}
	case "extractRegex":
		if v != "" && len(v) <= MaxSettingJSON && utf8.ValidString(v) {
			s.extract().Regex = v
		}
	case "extractUnit":
		if t, ok := text(); ok {
			s.extract().Unit = t
		}
	case "retentionItems":
		if n, err := strconv.Atoi(v); err == nil && n > 0 {
			s.Retention.MaxItems = n
		}
	case "retentionAge":
		if d, err := time.ParseDuration(v); err == nil && d > 0 {
			s.Retention.MaxAge = d
		}
	case "reduce":
		if r, ok := raw(); ok {
			s.Reduce = r
		}
	case "sleep":
		if plan, err := schedule.ParseSleep(v); err == nil {
			s.Sleep = plan
		}
	}
}

func (s *Settings) source() *storage.SourceSpec {
	if s.Source == nil {
		s.Source = &storage.SourceSpec{}
	}
	return s.Source
}

func (s *Settings) extract() *storage.ExtractRule {
	if s.Extract == nil {
		s.Extract = &storage.ExtractRule{}
	}
	return s.Extract
}

// finish drops half-given settings: a source configuration without a
// type, an extract rule without a regular expression.
func (s *Settings) finish() {
	if s.Source != nil && s.Source.Type == "" {
		s.Source = nil
	}
	if s.Extract != nil && s.Extract.Regex == "" {
		s.Extract = nil
	}
}

// SettingsOf returns the settings of feed f that an export keeps.
func SettingsOf(f storage.Feed) Settings {
	return Settings{
		Policy: f.Policy, Weight: f.Weight, IgnoreCache: f.IgnoreCache, Source: f.Source, Extract: f.Extract,
		Retention: f.Retention, Reduce: f.Reduce,
		Sleep: schedule.SleepPlan{Daily: f.Sleep.Daily, Windows: f.Sleep.Windows},
	}
}

// OutlineOf returns the outline that exports remote feed f.
func OutlineOf(f storage.Feed) Outline {
	return Outline{URL: f.URL, Title: f.Title, Site: f.Site, Category: f.Category, Settings: SettingsOf(f)}
}

// Feed returns the feed to subscribe to for o, with its settings; policy
// is the policy of an outline that names none ("" leaves the default).
func (o Outline) Feed(policy string) storage.Feed {
	s := o.Settings
	f := storage.Feed{
		URL: o.URL, Title: o.Title, Site: o.Site, Category: o.Category,
		Policy: s.Policy, Weight: s.Weight, IgnoreCache: s.IgnoreCache, Source: s.Source, Extract: s.Extract,
		Retention: s.Retention, Reduce: s.Reduce,
	}
	f.Sleep.Daily, f.Sleep.Windows = s.Sleep.Daily, s.Sleep.Windows
	if f.Policy == "" {
		f.Policy = policy
	}
	return f
}
