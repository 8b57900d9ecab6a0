// Package feedext names slogfeed's extensions to RSS, Atom and JSON Feed,
// once, for both sides: the publisher (the sensor store and republished pipe
// outputs, package web) writes them and the parser (package reader/parser)
// reads them wherever it finds them, from slogfeed or from anyone else.
//
// # HTTP response headers (publisher hints)
//
//	Slogfeed-Phase: 12.5
//	    Seconds between the publish time of the feed's newest item and the
//	    arrival of this request (phase adjustment). A subscriber's newest
//	    publish time is its own receive time minus this value, which needs
//	    no clock agreement between the two machines.
//	Slogfeed-Desync: 4
//	    Seconds over which subscribers should spread their polls after the
//	    predicted publish time (intentional desynchronisation). The
//	    publisher grows it with its request load.
//	Slogfeed-More: 1
//	    More data is waiting than this response holds (a truncated feed):
//	    poll again at once. slogfeed's own feeds send it when the
//	    request's If-Modified-Since lies before the document's oldest item
//	    and older items are stored: the subscriber missed some, which the
//	    document's RFC 5005 link to the older page (rel="next",
//	    rel="prev-archive"; JSON Feed next_url) leads to. slogfeed's
//	    fetcher then follows those links.
//	Slogfeed-Next: 2026-11-21T19:30:00Z
//	    The publisher's own prediction of its next publish (RFC 3339),
//	    informational; Cache-Control max-age and <ttl> carry it to ordinary
//	    readers.
//	Slogfeed-Due: 31.250
//	    Seconds from this response until the update the publisher plans:
//	    sent only when its own schedule says when the feed changes next (a
//	    pipe's next fetch of the inputs it waits for, plus the time that
//	    fetch takes; a cron trigger), never as a guess from past publishes.
//	    The publisher spreads it over its desynchronisation interval
//	    itself. A subscriber polls right then; a plan that keeps missing is
//	    ignored until the next hit (schedule.MaxPlanMisses).
//
// # Typed sensor values
//
// Items carry a reading in slogfeed's namespace so a downstream slogfeed
// reads numbers, not strings; ordinary readers see the item's title and
// summary. In RSS and Atom:
//
//	<rss xmlns:sf="https://slogfeed.org/ns/sensor/1">
//	  <item> ... <sf:reading value="21.3" unit="C" sensor="lab-1"
//	      time="2026-11-21T19:30:00Z" lat="50.81" lon="4.38"/> </item>
//
// In JSON Feed 1.1, an item extension object:
//
//	"_slogfeed": {"value": 21.3, "unit": "C", "sensor": "lab-1",
//	              "time": "2026-11-21T19:30:00Z", "lat": 50.81, "lon": 4.38}
//
// value is required: a finite decimal number, with an optional fraction
// and exponent, of at most MaxNumberLen characters (ParseNumber reads it;
// a longer one is ignored). slogfeed writes the shortest form that reads
// back as the same float64, without exponent ("21.3", "0.0000001")
// unless that takes more than 24 characters ("1.2345678901234566e-50",
// "1.23456789e+68"), so every value it publishes reaches its subscribers.
// lat and lon are written the same way. The other fields are optional;
// time is the observation time (the item's own date is its publish time).
package feedext
