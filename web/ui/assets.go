package ui

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"net/http"
	"path"
	"strings"
)

// The JavaScript build (overwritten by the frontend's build), the
// hand-written CSS and script, and the page templates.
//
//go:embed dist/assets static templates
var files embed.FS

// contentTypes are the media types of the files the UI serves; a file
// with another extension is not served.
var contentTypes = map[string]string{
	".js":    "text/javascript; charset=utf-8",
	".mjs":   "text/javascript; charset=utf-8",
	".css":   "text/css; charset=utf-8",
	".map":   "application/json; charset=utf-8",
	".json":  "application/json; charset=utf-8",
	".svg":   "image/svg+xml",
	".png":   "image/png",
	".ico":   "image/x-icon",
	".woff2": "font/woff2",
	".woff":  "font/woff",
	".txt":   "text/plain; charset=utf-8",
}

// assetDir is one embedded directory served under a URL prefix, with the
// content hash of each file.
type assetDir struct {
	prefix string // URL prefix, e.g. "/ui/assets/"
	fsys   fs.FS
	files  map[string]assetFile
}

type assetFile struct {
	data  []byte
	hash  string // first 16 hex digits of its SHA-256
	ctype string
}

// newAssetDir loads every servable file below dir of files.
func newAssetDir(prefix, dir string) (*assetDir, error) {
	sub, err := fs.Sub(files, dir)
	if err != nil {
		return nil, err
	}
	d := &assetDir{prefix: prefix, fsys: sub, files: make(map[string]assetFile)}
	err = fs.WalkDir(sub, ".", func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		ctype, ok := contentTypes[path.Ext(p)]
		if !ok {
			return nil
		}
		data, err := fs.ReadFile(sub, p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(data)
		d.files[p] = assetFile{data: data, hash: hex.EncodeToString(sum[:8]), ctype: ctype}
		return nil
	})
	return d, err
}

// url returns the versioned URL of file name ("" when there is no such
// file: a template naming a missing file fails to render).
func (d *assetDir) url(name string) string {
	f, ok := d.files[name]
	if !ok {
		return ""
	}
	return d.prefix + name + "?v=" + f.hash
}

// ServeHTTP serves the file named by the path below the prefix. A request
// carrying the file's current hash (?v=) may be cached for a year; others
// are revalidated with the ETag.
func (d *assetDir) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	name := strings.TrimPrefix(r.URL.Path, d.prefix)
	f, ok := d.files[name]
	if !ok || name == "" || strings.Contains(name, "..") {
		http.NotFound(w, r)
		return
	}
	h := w.Header()
	h.Set("Content-Type", f.ctype)
	h.Set("X-Content-Type-Options", "nosniff")
	etag := `"` + f.hash + `"`
	h.Set("ETag", etag)
	if v := r.URL.Query().Get("v"); v != "" && v == f.hash {
		h.Set("Cache-Control", "public, max-age=31536000, immutable")
	} else {
		h.Set("Cache-Control", "no-cache")
	}
	if r.Header.Get("If-None-Match") == etag {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	h.Set("Content-Length", itoa(len(f.data)))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = w.Write(f.data)
	}
}
