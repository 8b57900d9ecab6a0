package opml

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"github.com/slogfeed/slogfeed/reader/sanitize"
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
// JSON, too long) is left out, and the subscription imports without it;
// the outline's Ignored lists each, with the reason (a policy this
// slogfeed cannot run too: the feed is subscribed with the default one).
// Whoever subscribes checks the rest (a bad source configuration) as for
// any subscription.
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

// readSetting reads one attribute of Namespace into s; a value it cannot
// use is left out, and readSetting says why ("" when it used it).
func (s *Settings) readSetting(name, v string) string {
	v = strings.TrimSpace(v)
	const badText = "want 1 to 256 bytes of UTF-8 text"
	text := func() (string, bool) { return v, v != "" && len(v) <= MaxSettingText && utf8.ValidString(v) }
	raw := func() (json.RawMessage, string) {
		if v == "" || len(v) > MaxSettingJSON {
			return nil, "want 1 byte to 64 KiB of JSON"
		}
		var b bytes.Buffer
		if err := json.Compact(&b, []byte(v)); err != nil {
			return nil, "not JSON: " + err.Error()
		}
		return json.RawMessage(b.Bytes()), ""
	}
	switch name {
	case "policy", "source", "extractField", "extractUnit":
		t, ok := text()
		if !ok {
			return badText
		}
		switch name {
		case "policy":
			// A policy this slogfeed cannot run (one a newer version
			// knows, a period out of range) is left out: the feed is
			// subscribed with the default policy rather than refused.
			if err := schedule.CheckNewPolicy(t); err != nil {
				return "not a policy this slogfeed can run: " + strings.TrimPrefix(err.Error(), "schedule: ")
			}
			s.Policy = t
		case "source":
			s.source().Type = t
		case "extractField":
			s.extract().Field = t
		case "extractUnit":
			s.extract().Unit = t
		}
	case "weight":
		w, err := strconv.ParseFloat(v, 64)
		if err != nil || !(w > 0) || math.IsInf(w, 0) {
			return "not a positive number"
		}
		s.Weight = w
	case "ignoreCache":
		b, err := strconv.ParseBool(v)
		if err != nil {
			return "not true or false"
		}
		s.IgnoreCache = b
	case "sourceConfig", "reduce":
		r, why := raw()
		if why != "" {
			return why
		}
		if name == "reduce" {
			s.Reduce = r
		} else {
			s.source().Config = r
		}
	case "extractRegex":
		if v == "" || len(v) > MaxSettingJSON || !utf8.ValidString(v) {
			return "want 1 byte to 64 KiB of UTF-8 text"
		}
		s.extract().Regex = v
	case "retentionItems":
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			return "not a positive whole number"
		}
		s.Retention.MaxItems = n
	case "retentionAge":
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return "not a positive duration such as 720h"
		}
		s.Retention.MaxAge = d
	case "sleep":
		plan, err := schedule.ParseSleep(v)
		if err != nil {
			return err.Error()
		}
		s.Sleep = plan
	default:
		return "not a setting slogfeed knows"
	}
	return ""
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
// type, an extract rule without a regular expression; it returns what it
// dropped.
func (s *Settings) finish() []IgnoredSetting {
	var dropped []IgnoredSetting
	if s.Source != nil && s.Source.Type == "" {
		dropped = append(dropped, IgnoredSetting{Attr: "sourceConfig", Value: sanitize.Clip(string(s.Source.Config), MaxIgnoredValue), Reason: "no " + Prefix + ":source names the adapter"})
		s.Source = nil
	}
	if s.Extract != nil && s.Extract.Regex == "" {
		dropped = append(dropped, IgnoredSetting{Attr: "extractField", Value: sanitize.Clip(s.Extract.Field+" "+s.Extract.Unit, MaxIgnoredValue), Reason: "no " + Prefix + ":extractRegex"})
		s.Extract = nil
	}
	return dropped
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
