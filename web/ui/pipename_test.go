package ui

import (
	"context"
	"encoding/json"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/slogfeed/slogfeed/transform"
)

// A pipe's name with markup shows as the plain text the republished feeds
// show, wherever the UI names the pipe: the list, the builder's heading,
// the delete confirmation and the flash after it.
func TestPipeNamePlainText(t *testing.T) {
	e := newEnv(t, envOptions{loopback: true})
	c := e.client(t)
	var def transform.Pipe
	if err := json.Unmarshal([]byte(`{"name": "Hostile <b>pass</b> 😀", "nodes": [{"id": "lab", "op": "source", "config": {"feed": "sensor/lab-1"}}],
		"edges": [], "output": {"slug": "hostile"}}`), &def); err != nil {
		t.Fatal(err)
	}
	info, err := e.pipes.Create(context.Background(), def)
	if err != nil {
		t.Fatal(err)
	}
	id := strconv.FormatUint(info.ID, 10)
	const plain = "Hostile pass 😀"
	for _, tt := range []struct{ path, want string }{
		{"/ui/pipes", `<a href="/ui/pipes/` + id + `">` + plain + `</a>`},
		{"/ui/pipes/" + id, "<h1>" + plain + "</h1>"},
		{"/ui/pipes/" + id + "/delete", "<h1>Delete the pipe “" + plain + "”?</h1>"},
	} {
		r := c.get(t, tt.path)
		checkPage(t, r)
		if !strings.Contains(r.body, tt.want) {
			t.Errorf("%s lacks %q", tt.path, tt.want)
		}
		if strings.Contains(r.body, "&lt;b&gt;") {
			t.Errorf("%s shows the name's tags", tt.path)
		}
	}
	r := c.post(t, "/ui/pipes/"+id+"/delete", url.Values{}, true)
	page := c.get(t, r.header.Get("Location"))
	if want := "Deleted the pipe “" + plain + "”."; !strings.Contains(page.body, want) {
		t.Errorf("no flash %q: %.2000s", want, page.body)
	}
}

// A pipe's name reads in the UI as its republished feeds publish it: its
// markup removed and its entities decoded once (publish.PlainTitle).
func TestPipeNameAsPublished(t *testing.T) {
	for _, tt := range []struct{ name, want string }{
		{"Field mean", "Field mean"},
		{"AT&amp;T <b>lab</b>", "AT&T lab"},
		{"Tom &amp; Jerry", "Tom & Jerry"},
		{"5 &lt; 7", "5 < 7"},
		{"<script>x</script>", ""},
	} {
		if got := pipeName(tt.name); got != tt.want {
			t.Errorf("pipeName(%q) = %q, want %q", tt.name, got, tt.want)
		}
	}
}
