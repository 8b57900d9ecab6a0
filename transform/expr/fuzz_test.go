package expr

import (
	"errors"
	"strings"
	"testing"

	"github.com/slogfeed/slogfeed/transform"
)

// FuzzCompile checks that no source text panics the compiler or the
// evaluator: Compile gives a FieldError or a program, and the program
// evaluates on a sample item within a small budget, to a value or an
// error.
func FuzzCompile(f *testing.F) {
	for _, s := range []string{
		`value > 25 && sensor.startsWith("lab")`,
		`value * 1.8 + 32`,
		`sensor + ": " + string(value)`,
		`present("value") ? value : 0`,
		`published > now - duration("1h")`,
		`categories.map(c, c.lowerAscii()).exists(c, c == "lab")`,
		`title.split(" ", 3).size() == 2 ? title.replace("a", "b") : title.upperAscii()`,
		`title.matches("^[a-z]+$")`,
		`math.greatest([value, lat, lon]) > math.ceil(1.2)`,
		`time.getHours("+02:00") == 3`,
		`"%s %d".format([title, 1])`,
		`[1,2,3].map(x, [1,2,3].map(y, x * y))`,
		`{"a": value}["a"] == 1 ? null : [1, "a", now]`,
		`dyn(title) == 1 || 1u + 2u > 0u || b"x" == bytes("x")`,
		`((((((value))))))`,
		`value +`,
		`"\u00e9".size() == 1 && '''x''' == "x"`,
		`title.substring(1, 3) + title.charAt(0) + title.reverse()`,
		`int(value) % 3 == 1 && double(feed) / 0.0 > 1.0`,
	} {
		f.Add(s, uint8(0))
		f.Add(s, uint8(1))
	}
	f.Fuzz(func(t *testing.T, src string, kind uint8) {
		want := Kind(kind % 5)
		p, err := Compile("expr", src, want)
		if err != nil {
			var fe *transform.FieldError
			if !errors.As(err, &fe) || fe.Field != "expr" {
				t.Fatalf("Compile(%q) error %v (%T) is not a FieldError for expr", src, err, err)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("Compile(%q) error spans lines: %q", src, err)
			}
			return
		}
		it := sample()
		v, err := p.Eval(ctx(transform.Limits{ExprCost: 20000}), &it)
		if err != nil {
			return
		}
		switch v.(type) {
		case nil, bool, float64, string, []string:
		default:
			if _, isTime := v.(interface{ Unix() int64 }); !isTime {
				t.Fatalf("Eval(%q) = %#v (%T), not a result type", src, v, v)
			}
		}
	})
}
