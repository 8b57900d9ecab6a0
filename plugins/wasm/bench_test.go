package wasm

import (
	"testing"

	"github.com/slogfeed/slogfeed/transform"
)

// BenchmarkDespike runs the despike example on a batch of 10,000
// readings: instantiation, the copy in, the module's work and decoding.
func BenchmarkDespike(b *testing.B) {
	op := build(b, inline(wat(b, "examples/despike.wat"), `"params":[5]`))
	vs := make([]float64, 10000)
	for i := range vs {
		vs[i] = 20 + float64(i%7)
		if i%50 == 0 {
			vs[i] = 90
		}
	}
	in := [][]transform.Item{readings(vs...)}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := op.Apply(ctx(), in); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkInstance is the fixed cost of a run: a fresh instance of a
// small module and one process call on one reading.
func BenchmarkInstance(b *testing.B) {
	op := build(b, inline(wat(b, "examples/c_to_f.wat"), ""))
	in := [][]transform.Item{readings(21)}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := op.Apply(ctx(), in); err != nil {
			b.Fatal(err)
		}
	}
}
