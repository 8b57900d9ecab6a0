package pipes_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/slogfeed/slogfeed/transform"
)

// A number where a whole number is wanted is refused saying so.
func TestWholeNumberMessages(t *testing.T) {
	tests := []struct {
		config string
		want   string
	}{
		{`{"count": 1.5}`, "want a whole number, got JSON number 1.5"},
		{`{"count": 1e30}`, "want a whole number"},
		{`{"count": "ten"}`, "want a whole number, got JSON string"},
	}
	for _, tt := range tests {
		p := transform.Pipe{
			Nodes: []transform.Node{
				{ID: "in", Op: "source", Config: json.RawMessage(`{"feed":"sensor/lab-1"}`)},
				{ID: "top", Op: "truncate", Config: json.RawMessage(tt.config)},
			},
			Edges:  []transform.Edge{{From: "in", To: "top"}},
			Output: transform.Output{Slug: "top"},
		}
		_, err := transform.Compile(p, transform.Limits{})
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want %q", tt.config, err, tt.want)
		}
	}
}
