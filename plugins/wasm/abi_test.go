package wasm

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/slogfeed/slogfeed/storage"
	"github.com/slogfeed/slogfeed/transform"
)

func TestEncodeRecords(t *testing.T) {
	obs := t0.Add(-time.Hour)
	tests := []struct {
		name  string
		item  transform.Item
		input int
		value float64 // NaN: none
		time  int64
		flags uint32
	}{
		{"reading with its time", transform.Item{Published: t0, Reading: &storage.Reading{Value: 21.5, Time: obs}}, 0, 21.5, obs.UnixNano(), FlagValue | FlagTime},
		{"reading without a time", transform.Item{Published: t0, Reading: &storage.Reading{Value: -3}}, 0, -3, t0.UnixNano(), FlagValue | FlagTime},
		{"no reading", transform.Item{Published: t0}, 0, math.NaN(), t0.UnixNano(), FlagTime},
		{"no time at all", transform.Item{}, 0, math.NaN(), 0, 0},
		{"time out of range", transform.Item{Published: time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC)}, 0, math.NaN(), 0, 0},
		{"second input", transform.Item{Published: t0, Reading: &storage.Reading{Value: 1, Time: obs}}, 2, 1, obs.UnixNano(), FlagValue | FlagTime | 2<<FlagInputShift},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := make([][]transform.Item, tt.input+1)
			in[tt.input] = []transform.Item{{}, tt.item} // the item is the second of its input
			buf := encodeRecords(newBatch(in), []float64{2.5})
			if n, p := binary.LittleEndian.Uint32(buf), binary.LittleEndian.Uint32(buf[4:]); n != 2 || p != 1 {
				t.Fatalf("header %d items, %d params", n, p)
			}
			if p := math.Float64frombits(binary.LittleEndian.Uint64(buf[8:])); p != 2.5 {
				t.Errorf("param %v", p)
			}
			if len(buf) != HeaderSize+8+2*RecordSize {
				t.Fatalf("%d bytes", len(buf))
			}
			r := buf[HeaderSize+8+RecordSize:]
			v := math.Float64frombits(binary.LittleEndian.Uint64(r))
			if v != tt.value && !(math.IsNaN(v) && math.IsNaN(tt.value)) {
				t.Errorf("value %v, want %v", v, tt.value)
			}
			if ns := int64(binary.LittleEndian.Uint64(r[8:])); ns != tt.time {
				t.Errorf("time %d, want %d", ns, tt.time)
			}
			if idx := binary.LittleEndian.Uint32(r[16:]); idx != 1 {
				t.Errorf("index %d, want 1", idx)
			}
			if f := binary.LittleEndian.Uint32(r[20:]); f != tt.flags {
				t.Errorf("flags %#x, want %#x", f, tt.flags)
			}
		})
	}
}

// record makes one output record.
func record(v float64, ns int64, idx int32, flags uint32) []byte {
	r := make([]byte, RecordSize)
	binary.LittleEndian.PutUint64(r, math.Float64bits(v))
	binary.LittleEndian.PutUint64(r[8:], uint64(ns))
	binary.LittleEndian.PutUint32(r[16:], uint32(idx))
	binary.LittleEndian.PutUint32(r[20:], flags)
	return r
}

func TestDecodeRecords(t *testing.T) {
	b := newBatch([][]transform.Item{readings(10, 20), {{ID: "text", Published: t0}}})
	later := t0.Add(time.Hour)
	var out []byte
	out = append(out, record(99, 0, 1, FlagValue)...)
	out = append(out, record(0, later.UnixNano(), 2, FlagTime)...)
	out = append(out, record(7, later.UnixNano(), 1, FlagValue|FlagTime)...)
	out = append(out, record(0, 0, 2, FlagValue)...)
	items, err := newOutput(b, "K", 100).decodeRecords(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(items) != 4 {
		t.Fatalf("%d items", len(items))
	}
	if it := items[0]; it.ID != "r1" || it.Reading.Value != 99 || it.Reading.Unit != "K" || it.Title != "lab-1: 99 K" || !it.Reading.Time.Equal(t0.Add(time.Minute)) {
		t.Errorf("value set: %+v %+v", it, it.Reading)
	}
	if it := items[1]; it.ID != "text" || it.Reading != nil || !it.Published.Equal(later) {
		t.Errorf("time set on an item without a reading: %+v", it)
	}
	if it := items[2]; it.ID != "r1~2" || it.Reading.Value != 7 || !it.Reading.Time.Equal(later) {
		t.Errorf("repeated index: %+v %+v", it, it.Reading)
	}
	if it := items[3]; it.ID != "text~2" || it.Reading == nil || it.Reading.Value != 0 || !it.Reading.Time.Equal(t0) {
		t.Errorf("value on an item without a reading: %+v", it)
	}
	if b.items[1].Reading.Value != 20 || b.items[2].Reading != nil {
		t.Error("the input items were modified")
	}

	bad := []struct {
		name string
		out  []byte
		msg  string
	}{
		{"negative index", record(1, 0, -1, 0), "index -1"},
		{"index past the end", record(1, 0, 3, 0), "index 3"},
		{"infinite value", record(math.Inf(1), 0, 0, FlagValue), "not a finite number"},
		{"unknown flag", record(1, 0, 0, 1<<FlagInputShift), "unknown flags"},
		{"partial record", make([]byte, RecordSize+1), "not a whole number"},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			_, err := newOutput(b, "", 100).decodeRecords(tt.out)
			if !errors.Is(err, ErrOutput) || !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("error %v, want ErrOutput saying %q", err, tt.msg)
			}
		})
	}
	// More records than MaxItems.
	many := make([]byte, 3*RecordSize)
	if _, err := newOutput(b, "", 2).decodeRecords(many); !errors.Is(err, transform.ErrLimit) {
		t.Errorf("over MaxItems: %v", err)
	}
}

func TestDecodeJSON(t *testing.T) {
	b := newBatch([][]transform.Item{readings(10)})
	tests := []struct {
		name, out, msg string
		want           error
	}{
		{"no index", `{"items":[{"value":1}]}`, "no index", ErrOutput},
		{"unknown field", `{"items":[{"index":0,"colour":"red"}]}`, "unknown field", ErrOutput},
		{"trailing data", `{"items":[]} {}`, "data after", ErrOutput},
		{"not JSON", `items`, "not the output JSON", ErrOutput},
		{"number out of range", `{"items":[{"index":0,"value":1e999}]}`, "not the output JSON", ErrOutput},
		{"time out of range", `{"items":[{"index":0,"time":"3000-01-01T00:00:00Z"}]}`, "out of range", ErrOutput},
		{"index past the end", `{"items":[{"index":1}]}`, "index 1", ErrOutput},
		{"long title", `{"items":[{"index":0,"title":"` + strings.Repeat("x", 70<<10) + `"}]}`, "title", ErrOutput},
		{"many categories", `{"items":[{"index":0,"categories":[` + strings.Repeat(`"a",`, MaxCategories) + `"a"]}]}`, "categories", ErrOutput},
		{"long unit", `{"items":[{"index":0,"unit":"` + strings.Repeat("u", 65) + `"}]}`, "unit", ErrOutput},
		{"error", `{"items":[],"error":"<b>calibration</b> missing"}`, "calibration missing", ErrReported},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := newOutput(b, "", 100).decodeJSON([]byte(tt.out), transform.DefaultLimits.MaxText)
			if !errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("error %v, want %v saying %q", err, tt.want, tt.msg)
			}
		})
	}
	items, err := newOutput(b, "", 100).decodeJSON([]byte(`{"items":[{"index":0,"unit":"K","time":"2026-03-01T13:00:00+01:00","categories":["a","<i></i>"]}]}`), 100)
	if err != nil {
		t.Fatal(err)
	}
	if it := items[0]; it.Reading.Unit != "K" || it.Reading.Value != 10 || !it.Reading.Time.Equal(t0) || len(it.Categories) != 1 {
		t.Errorf("item %+v %+v", it, it.Reading)
	}
}

func TestEncodeJSON(t *testing.T) {
	raw, err := encodeJSON(newBatch([][]transform.Item{readings(1), readings(2)}), nil)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		ABI    int              `json:"abi"`
		Params []float64        `json:"params"`
		Inputs []int            `json:"inputs"`
		Items  []map[string]any `json:"items"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.ABI != ABIVersion || doc.Params == nil || len(doc.Inputs) != 2 || doc.Inputs[1] != 1 || len(doc.Items) != 2 || doc.Items[1]["reading"] == nil {
		t.Errorf("document %s", raw)
	}
	// A batch too large for JSON is refused before the module runs.
	big := readings(1)
	big[0].Content = strings.Repeat("x", MaxJSONBytes)
	if _, err := encodeJSON(newBatch([][]transform.Item{big}), nil); !errors.Is(err, transform.ErrLimit) {
		t.Errorf("large batch: %v", err)
	}
}

// Whatever bytes a module returns, decoding does not panic, and every
// item it makes is a copy of an input item.
func FuzzDecodeRecords(f *testing.F) {
	f.Add(record(1, 0, 0, FlagValue))
	f.Add(append(record(math.NaN(), 1, 1, FlagTime), record(2, -1, 0, 3)...))
	f.Add([]byte{1, 2, 3})
	b := newBatch([][]transform.Item{readings(1, 2)})
	f.Fuzz(func(t *testing.T, out []byte) {
		items, err := newOutput(b, "u", 8).decodeRecords(out)
		if err != nil {
			return
		}
		for _, it := range items {
			if !strings.HasPrefix(it.ID, "r") || it.Reading == nil || math.IsNaN(it.Reading.Value) {
				t.Fatalf("item %+v", it)
			}
		}
	})
}

func FuzzDecodeJSON(f *testing.F) {
	f.Add(`{"items":[{"index":0,"value":1,"title":"<b>x</b>"}]}`)
	f.Add(`{"items":[{"index":1,"summary":"<script>x</script>","categories":["a"]}],"error":""}`)
	f.Add(`{"error":"bad"}`)
	b := newBatch([][]transform.Item{readings(1, 2)})
	f.Fuzz(func(t *testing.T, out string) {
		items, err := newOutput(b, "", 8).decodeJSON([]byte(out), 256)
		if err != nil {
			return
		}
		for _, it := range items {
			if !strings.HasPrefix(it.ID, "r") || strings.Contains(it.Summary, "<script") || len(it.Title) > 4*256 {
				t.Fatalf("item %+v", it)
			}
		}
	})
}
