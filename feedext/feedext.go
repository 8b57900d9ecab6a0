package feedext

// Header names of the publisher hints.
const (
	HeaderPhase  = "Slogfeed-Phase"
	HeaderDesync = "Slogfeed-Desync"
	HeaderMore   = "Slogfeed-More"
	HeaderNext   = "Slogfeed-Next"
	HeaderDue    = "Slogfeed-Due"
)

// Namespace is the XML namespace of the sensor element; Prefix is the
// prefix slogfeed writes (readers must match on Namespace, not on Prefix).
const (
	Namespace = "https://slogfeed.org/ns/sensor/1"
	Prefix    = "sf"
	// Element is the local name of the reading element.
	Element = "reading"
	// JSONKey is the JSON Feed item extension key.
	JSONKey = "_slogfeed"
)

// Attribute names of the reading element (and keys of the JSON object).
const (
	AttrValue  = "value"
	AttrUnit   = "unit"
	AttrSensor = "sensor"
	AttrTime   = "time"
	AttrLat    = "lat"
	AttrLon    = "lon"
)
