package sim

import (
	"bufio"
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"
)

// Limits on trace input. Traces are external input: a line longer than
// MaxLineLen bytes (terminator included) is skipped as malformed, and a
// file with more than MaxItems readings is refused with ErrTooManyItems.
const (
	MaxLineLen  = 4096
	MaxItems    = 5_000_000
	maxSensorID = 64
	// maxUnixMilli is 9999-12-31T23:59:59.999Z.
	maxUnixMilli = 253402300799999
	// plainMilliAbove: plain timestamps above this are milliseconds.
	plainMilliAbove = 100_000_000_000
	sniffBytes      = 64 << 10
)

// Sentinel errors of the trace parsers.
var (
	// ErrNoData means that not a single reading could be parsed.
	ErrNoData = errors.New("sim: no readings in trace")
	// ErrTooManyItems means that the trace has more than MaxItems readings.
	ErrTooManyItems = errors.New("sim: too many readings in trace")
)

// Trace is the publishing history of one sensor feed.
type Trace struct {
	// Name is the trace file's base name.
	Name string
	// Sensor is the mote (sensor) id within the file; empty for plain
	// traces, which hold one sensor.
	Sensor string
	// Items are the readings, sorted by Published (= Observed). Exact
	// duplicate times are kept: they are two readings published together.
	Items []Item
	// Skipped is the number of malformed lines skipped while parsing the
	// file the trace came from (the same count for every trace of a file).
	Skipped int
}

// ParseULB parses a trace in the ULB sensorNet format: one reading per
// line, space separated, column A the arrival time in Unix milliseconds
// (optionally with a fractional part), column B the mote id; further
// columns (sequence counter, sensor values with decimal commas, stray
// non-UTF-8 bytes) are ignored. Blank lines and lines starting with '#' are
// skipped silently; malformed lines (no id, bad time, id not printable
// UTF-8 or longer than 64 bytes, line too long) are skipped and counted in
// Trace.Skipped. It returns one Trace per mote, sorted by mote id (numeric
// ids numerically, before other ids), each with its items sorted by time.
// It fails with ErrNoData when nothing parses and ErrTooManyItems beyond
// MaxItems readings.
func ParseULB(name string, r io.Reader) ([]Trace, error) {
	return parseULB(name, r, MaxItems)
}

func parseULB(name string, r io.Reader, maxItems int) ([]Trace, error) {
	lr := newLineReader(r)
	index := make(map[string]int)
	var traces []Trace
	skipped, total := 0, 0
	for {
		line, tooLong, err := lr.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("sim: reading %s: %w", name, err)
		}
		if tooLong {
			skipped++
			continue
		}
		a, b, nf := fields2(line)
		if nf == 0 || a[0] == '#' {
			continue
		}
		t, ok := parseMillis(a)
		if nf < 2 || !ok || !validSensorID(b) {
			skipped++
			continue
		}
		if total++; total > maxItems {
			return nil, fmt.Errorf("%s: %w (more than %d)", name, ErrTooManyItems, maxItems)
		}
		i, ok := index[string(b)]
		if !ok {
			i = len(traces)
			index[string(b)] = i
			traces = append(traces, Trace{Name: name, Sensor: string(b)})
		}
		traces[i].Items = append(traces[i].Items, Item{Published: t, Observed: t})
	}
	if total == 0 {
		return nil, fmt.Errorf("%s: %w (%d malformed lines)", name, ErrNoData, skipped)
	}
	for i := range traces {
		traces[i].Skipped = skipped
		sortItems(traces[i].Items)
	}
	slices.SortFunc(traces, func(x, y Trace) int { return compareIDs(x.Sensor, y.Sensor) })
	return traces, nil
}

// ParsePlain parses a trace holding one Unix timestamp per line: seconds,
// optionally fractional (with a decimal point or comma), or milliseconds
// when the value is above 1e11. '#' starts a comment; blank lines are
// skipped. Malformed lines (more than one value, not a number, negative,
// beyond the year 9999, line too long) are skipped and counted in
// Trace.Skipped. Items are sorted by time. It fails with ErrNoData when
// nothing parses and ErrTooManyItems beyond MaxItems readings.
func ParsePlain(name string, r io.Reader) (Trace, error) {
	return parsePlain(name, r, MaxItems)
}

func parsePlain(name string, r io.Reader, maxItems int) (Trace, error) {
	lr := newLineReader(r)
	tr := Trace{Name: name}
	for {
		line, tooLong, err := lr.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return Trace{}, fmt.Errorf("sim: reading %s: %w", name, err)
		}
		if tooLong {
			tr.Skipped++
			continue
		}
		if i := bytes.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		a, _, nf := fields2(line)
		if nf == 0 {
			continue
		}
		t, ok := parseTimestamp(a)
		if nf > 1 || !ok {
			tr.Skipped++
			continue
		}
		if len(tr.Items) >= maxItems {
			return Trace{}, fmt.Errorf("%s: %w (more than %d)", name, ErrTooManyItems, maxItems)
		}
		tr.Items = append(tr.Items, Item{Published: t, Observed: t})
	}
	if len(tr.Items) == 0 {
		return Trace{}, fmt.Errorf("%s: %w (%d malformed lines)", name, ErrNoData, tr.Skipped)
	}
	sortItems(tr.Items)
	return tr, nil
}

// Load reads the trace file at path, telling the format from its first
// reading line: two or more columns are ULB, a single value is plain. The
// traces are named after the file's base name.
func Load(path string) ([]Trace, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("sim: load trace: %w", err)
	}
	defer f.Close()
	name := filepath.Base(path)
	head := make([]byte, sniffBytes)
	n, err := io.ReadFull(f, head)
	if err != nil && err != io.EOF && err != io.ErrUnexpectedEOF {
		return nil, fmt.Errorf("sim: reading %s: %w", name, err)
	}
	head = head[:n]
	r := io.MultiReader(bytes.NewReader(head), f)
	if sniffULB(head) {
		return ParseULB(name, r)
	}
	tr, err := ParsePlain(name, r)
	if err != nil {
		return nil, err
	}
	return []Trace{tr}, nil
}

// sniffULB reports whether the first reading line of head (skipping blank
// lines and comments) has at least two columns.
func sniffULB(head []byte) bool {
	for len(head) > 0 {
		line := head
		if i := bytes.IndexByte(head, '\n'); i >= 0 {
			line, head = head[:i], head[i+1:]
		} else {
			head = nil
		}
		if i := bytes.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		if _, _, nf := fields2(line); nf > 0 {
			return nf >= 2
		}
	}
	return false
}

// lineReader yields lines of at most MaxLineLen bytes without holding more
// than that in memory.
type lineReader struct{ br *bufio.Reader }

func newLineReader(r io.Reader) lineReader {
	return lineReader{br: bufio.NewReaderSize(r, MaxLineLen)}
}

// next returns the next line without its terminator ("\n" or "\r\n"). A line
// that does not fit the buffer is discarded and reported with tooLong. The
// error is io.EOF after the last line.
func (lr lineReader) next() (line []byte, tooLong bool, err error) {
	line, err = lr.br.ReadSlice('\n')
	if err == bufio.ErrBufferFull {
		for err == bufio.ErrBufferFull {
			_, err = lr.br.ReadSlice('\n')
		}
		if err != nil && err != io.EOF {
			return nil, false, err
		}
		return nil, true, nil
	}
	if err == io.EOF {
		if len(line) == 0 {
			return nil, false, io.EOF
		}
		err = nil
	}
	if err != nil {
		return nil, false, err
	}
	line = bytes.TrimSuffix(line, []byte{'\n'})
	line = bytes.TrimSuffix(line, []byte{'\r'})
	return line, false, nil
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'
}

// fields2 splits line on ASCII white space and returns its first two
// fields and the number of fields, without allocating.
func fields2(line []byte) (a, b []byte, n int) {
	i := 0
	for {
		for i < len(line) && isSpace(line[i]) {
			i++
		}
		if i == len(line) {
			return a, b, n
		}
		j := i
		for j < len(line) && !isSpace(line[j]) {
			j++
		}
		switch n {
		case 0:
			a = line[i:j]
		case 1:
			b = line[i:j]
		}
		n++
		i = j
	}
}

// parseDecimal parses an unsigned decimal number with an optional
// fractional part after '.' or ',' into its whole part and its fraction in
// billionths (digits beyond the ninth are truncated).
func parseDecimal(b []byte) (whole, frac int64, ok bool) {
	i := 0
	for ; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
		if i >= 18 { // beyond any timestamp we accept; avoids overflow
			return 0, 0, false
		}
		whole = whole*10 + int64(b[i]-'0')
	}
	if i == 0 {
		return 0, 0, false
	}
	if i == len(b) {
		return whole, 0, true
	}
	if b[i] != '.' && b[i] != ',' {
		return 0, 0, false
	}
	i++
	scale := int64(100_000_000)
	for ; i < len(b); i++ {
		if b[i] < '0' || b[i] > '9' {
			return 0, 0, false
		}
		frac += int64(b[i]-'0') * scale
		scale /= 10
	}
	return whole, frac, true
}

// parseMillis parses a Unix time in milliseconds.
func parseMillis(b []byte) (time.Time, bool) {
	whole, frac, ok := parseDecimal(b)
	if !ok || whole > maxUnixMilli {
		return time.Time{}, false
	}
	return fromMillis(whole, frac), true
}

func fromMillis(whole, frac int64) time.Time {
	return time.Unix(whole/1000, (whole%1000)*1_000_000+frac/1000).UTC()
}

// parseTimestamp parses a Unix time in seconds, or in milliseconds when
// the value is above 1e11.
func parseTimestamp(b []byte) (time.Time, bool) {
	whole, frac, ok := parseDecimal(b)
	switch {
	case !ok:
		return time.Time{}, false
	case whole > plainMilliAbove || (whole == plainMilliAbove && frac > 0):
		if whole > maxUnixMilli {
			return time.Time{}, false
		}
		return fromMillis(whole, frac), true
	default:
		return time.Unix(whole, frac).UTC(), true
	}
}

// validSensorID accepts printable UTF-8 ids of at most maxSensorID bytes.
func validSensorID(b []byte) bool {
	if len(b) == 0 || len(b) > maxSensorID || !utf8.Valid(b) {
		return false
	}
	for _, c := range b {
		if c < 0x20 || c == 0x7f {
			return false
		}
	}
	return true
}

// compareIDs orders numeric ids numerically and before all other ids,
// which are ordered as strings.
func compareIDs(x, y string) int {
	nx, ex := strconv.ParseUint(x, 10, 64)
	ny, ey := strconv.ParseUint(y, 10, 64)
	switch {
	case ex == nil && ey == nil:
		if c := cmp.Compare(nx, ny); c != 0 {
			return c
		}
	case ex == nil:
		return -1
	case ey == nil:
		return 1
	}
	return cmp.Compare(x, y)
}

// sortItems sorts items by Published when they are not sorted already.
func sortItems(items []Item) {
	if !slices.IsSortedFunc(items, cmpPublished) {
		slices.SortStableFunc(items, cmpPublished)
	}
}
