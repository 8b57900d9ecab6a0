package fetcher

import (
	"bytes"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestReadBody: bodies come out whole whatever their size, framing and
// encoding; the limit holds after decompression; bodies read one after
// the other through the pooled buffers never share memory.
func TestReadBody(t *testing.T) {
	gz := func(b []byte) []byte {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		zw.Write(b)
		zw.Close()
		return buf.Bytes()
	}
	zl := func(b []byte) []byte {
		var buf bytes.Buffer
		zw := zlib.NewWriter(&buf)
		zw.Write(b)
		zw.Close()
		return buf.Bytes()
	}
	raw := func(b []byte) []byte {
		var buf bytes.Buffer
		fw, _ := flate.NewWriter(&buf, flate.DefaultCompression)
		fw.Write(b)
		fw.Close()
		return buf.Bytes()
	}
	small := []byte("<rss><channel><title>t</title></channel></rss>")
	big := bytes.Repeat([]byte("<!-- 0123456789abcdef -->"), 3000) // 75 KB: several reads, a grown buffer
	const limit = 80 << 10
	tests := []struct {
		name    string
		body    []byte
		enc     string
		length  int64 // Content-Length; -1: unknown (chunked)
		want    []byte
		wantErr error
	}{
		{"small, length known", small, "", int64(len(small)), small, nil},
		{"small, chunked", small, "", -1, small, nil},
		{"big, chunked", big, "", -1, big, nil},
		{"empty", nil, "", 0, []byte{}, nil},
		{"exactly the limit", bytes.Repeat([]byte("x"), limit), "", -1, bytes.Repeat([]byte("x"), limit), nil},
		{"one byte over the limit", bytes.Repeat([]byte("x"), limit+1), "", -1, nil, ErrTooLarge},
		{"over the limit, announced", small, "", limit + 1, nil, ErrTooLarge},
		{"gzip", gz(big), "gzip", -1, big, nil},
		{"x-gzip", gz(small), "x-gzip", -1, small, nil},
		{"gzip magic without Content-Encoding", gz(big), "", -1, big, nil},
		{"gzip over the limit once decompressed", gz(bytes.Repeat([]byte("x"), limit+1)), "gzip", -1, nil, ErrTooLarge},
		{"corrupt gzip", gz(big)[:100], "gzip", -1, nil, ErrEncoding},
		{"not gzip at all", small, "gzip", -1, nil, ErrEncoding},
		{"deflate (zlib)", zl(big), "deflate", -1, big, nil},
		{"deflate, raw", raw(big), "Deflate", -1, big, nil},
		{"deflate over the limit once decompressed", zl(bytes.Repeat([]byte("x"), limit+1)), "deflate", -1, nil, ErrTooLarge},
		{"raw deflate over the limit once decompressed", raw(bytes.Repeat([]byte("x"), limit+1)), "deflate", -1, nil, ErrTooLarge},
		{"corrupt deflate", zl(big)[:100], "deflate", -1, nil, ErrEncoding},
		{"deflate with a bad checksum", append(zl(small)[:len(zl(small))-4], 0, 0, 0, 0), "deflate", -1, nil, ErrEncoding},
		{"not deflate at all", small, "deflate", -1, nil, ErrEncoding},
		{"empty deflate", nil, "deflate", -1, nil, ErrEncoding},
		{"unknown encoding", small, "br", -1, nil, ErrEncoding},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			if tc.enc != "" {
				h.Set("Content-Encoding", tc.enc)
			}
			resp := &http.Response{Header: h, ContentLength: tc.length, Body: io.NopCloser(bytes.NewReader(tc.body))}
			got, err := readBody(resp, limit)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("error %v, want %v", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, tc.want) {
				t.Fatalf("got %d bytes, want %d", len(got), len(tc.want))
			}
		})
	}
	t.Run("bodies never share memory", func(t *testing.T) {
		read := func(s string) []byte {
			b, err := readBody(&http.Response{Header: http.Header{}, ContentLength: -1, Body: io.NopCloser(strings.NewReader(s))}, limit)
			if err != nil {
				t.Fatal(err)
			}
			return b
		}
		first := read(strings.Repeat("a", 1000))
		for range 10 {
			read(strings.Repeat("b", 1000))
		}
		if strings.Count(string(first), "a") != 1000 {
			t.Fatal("a later read overwrote an earlier body")
		}
	})
}
