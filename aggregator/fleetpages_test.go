package aggregator_test

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
)

// bucketPages is one bucket's share of the data file in BenchmarkFleet's
// report: its pages (overflow pages included) and how many of them are
// resident in this process's mapping of the file.
type bucketPages struct {
	name            string
	pages, resident int64
	used            int64 // bytes of its leaf elements, keys and values
	referenced      int64 // pages referenced since the last clear_refs
}

// Page layout of a bbolt file (little-endian on the machines the
// benchmark runs on): a 16-byte header (id, flags, count, overflow),
// then count elements of 16 bytes.
const (
	boltBranch     = 0x01
	boltLeaf       = 0x02
	boltBucketLeaf = 0x01 // a leaf element's flag: its value is a bucket
	boltHeader     = 16
	boltElem       = 16
	boltMaxDepth   = 64 // a hostile or torn file cannot recurse further
)

// fileBuckets attributes every page of the bbolt file at path to the
// bucket that holds it ("a/b" for nested buckets; "(meta, free list and
// free pages)" for the rest) and counts those resident in this process's
// mapping of the file, read from /proc/self/pagemap. It reads the file
// with pread, which maps nothing. Each bucket is listed once, largest
// first.
func fileBuckets(path string) ([]bucketPages, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	psz := int64(os.Getpagesize())
	meta := make([]byte, 4096)
	if _, err := f.ReadAt(meta, 0); err != nil {
		return nil, err
	}
	// Meta: header, magic, version, page size, flags, root bucket
	// (root, sequence), free list, high water, txid, checksum. The
	// newer of the two metas is the current one.
	readMeta := func(b []byte) (root, hwm, txid uint64) {
		m := b[boltHeader:]
		return binary.LittleEndian.Uint64(m[16:]), binary.LittleEndian.Uint64(m[40:]), binary.LittleEndian.Uint64(m[48:])
	}
	if ps := int64(binary.LittleEndian.Uint32(meta[boltHeader+8:])); ps != psz {
		return nil, fmt.Errorf("page size %d, not the OS's %d", ps, psz)
	}
	meta1 := make([]byte, psz)
	if _, err := f.ReadAt(meta1, psz); err != nil {
		return nil, err
	}
	root, hwm, tx0 := readMeta(meta)
	if r1, h1, tx1 := readMeta(meta1); tx1 > tx0 {
		root, hwm = r1, h1
	}
	if int64(hwm)*psz > fi.Size() {
		return nil, fmt.Errorf("high water %d pages past the file's %d bytes", hwm, fi.Size())
	}
	owner := make([]int32, hwm) // 0: none, else index+1 into names
	var names []string
	used := map[string]int64{}
	buf := make([]byte, psz)
	var walk func(pgid uint64, name string, depth int) error
	var walkPage func(p []byte, name string, depth int) error
	walkPage = func(p []byte, name string, depth int) error {
		flags, count := binary.LittleEndian.Uint16(p[8:]), int(binary.LittleEndian.Uint16(p[10:]))
		for i := range count {
			e := boltHeader + i*boltElem
			if e+boltElem > len(p) {
				return fmt.Errorf("%s: element %d past its page", name, i)
			}
			switch flags {
			case boltBranch:
				if err := walk(binary.LittleEndian.Uint64(p[e+8:]), name, depth+1); err != nil {
					return err
				}
			case boltLeaf:
				pos, ksz, vsz := int(binary.LittleEndian.Uint32(p[e+4:])), int(binary.LittleEndian.Uint32(p[e+8:])), int(binary.LittleEndian.Uint32(p[e+12:]))
				if binary.LittleEndian.Uint32(p[e:])&boltBucketLeaf == 0 {
					used[topName(name)] += int64(boltElem + ksz + vsz)
					if name == "feeds" && e+pos+ksz <= len(p) {
						kind := "feeds: records"
						if ksz == 9 {
							kind = fmt.Sprintf("feeds: %q entries", p[e+pos+8])
						}
						used[kind] += int64(boltElem + ksz + vsz)
					}
					continue
				}
				if e+pos+ksz+vsz > len(p) || vsz < 16 {
					return fmt.Errorf("%s: bucket element %d out of its page", name, i)
				}
				k, v := string(p[e+pos:e+pos+ksz]), p[e+pos+ksz:e+pos+ksz+vsz]
				sub := k
				if name != "" {
					sub = name + "/" + k
				}
				if r := binary.LittleEndian.Uint64(v); r != 0 {
					if err := walk(r, sub, depth+1); err != nil {
						return err
					}
				} else if err := walkPage(slices.Clone(v[16:]), sub, depth+1); err != nil { // inline bucket
					return err
				}
			}
		}
		return nil
	}
	walk = func(pgid uint64, name string, depth int) error {
		if depth > boltMaxDepth || pgid >= hwm {
			return fmt.Errorf("%s: page %d out of the file (depth %d)", name, pgid, depth)
		}
		if _, err := f.ReadAt(buf, int64(pgid)*psz); err != nil {
			return err
		}
		over := int64(binary.LittleEndian.Uint32(buf[12:]))
		if int64(pgid)+over >= int64(hwm) {
			return fmt.Errorf("%s: page %d overflows the file", name, pgid)
		}
		p := make([]byte, (over+1)*psz)
		if _, err := f.ReadAt(p, int64(pgid)*psz); err != nil {
			return err
		}
		top := topName(name)
		at := slices.Index(names, top)
		if at < 0 {
			names = append(names, top)
			at = len(names) - 1
		}
		for i := range over + 1 {
			owner[int64(pgid)+i] = int32(at + 1)
		}
		return walkPage(p, name, depth)
	}
	if err := walk(root, "", 0); err != nil {
		return nil, err
	}
	present, err := mappedPages(path, int64(hwm))
	if err != nil {
		return nil, err
	}
	out := make([]bucketPages, len(names)+1)
	for i, n := range names {
		out[i].name, out[i].used = n, used[n]
	}
	for k, v := range used {
		if strings.HasPrefix(k, "feeds: ") {
			out = append(out, bucketPages{name: k, used: v})
		}
	}
	out[len(names)].name = "(meta, free list and free pages)"
	for pg, o := range owner {
		at := len(names)
		if o > 0 {
			at = int(o - 1)
		}
		out[at].pages++
		if present != nil && present[pg] {
			out[at].resident++
		}
	}
	slices.SortFunc(out, func(a, b bucketPages) int { return int(b.pages - a.pages) })
	return out, nil
}

// topName is the name a bucket's pages are counted under: nested buckets
// with their top-level parent.
func topName(name string) string {
	if i := strings.IndexByte(name, '/'); i >= 0 {
		return name[:i+1] + "*"
	}
	if name == "" {
		return "(root)"
	}
	return name
}

// mappedPages reports which of the first n pages of this process's
// mapping of the file at path are resident (/proc/self/pagemap: bit 63
// of each page's entry); nil when the file is not mapped.
func mappedPages(path string, n int64) ([]bool, error) {
	maps, err := os.Open("/proc/self/maps")
	if err != nil {
		return nil, err
	}
	defer maps.Close()
	var start uint64
	found := false
	sc := bufio.NewScanner(maps)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 6 || f[5] != path || f[2] != "00000000" {
			continue
		}
		lo, _, _ := strings.Cut(f[0], "-")
		if start, err = strconv.ParseUint(lo, 16, 64); err != nil {
			return nil, err
		}
		found = true
		break
	}
	if !found {
		return nil, nil
	}
	pm, err := os.Open("/proc/self/pagemap")
	if err != nil {
		return nil, err
	}
	defer pm.Close()
	psz := uint64(os.Getpagesize())
	raw := make([]byte, n*8)
	if _, err := pm.ReadAt(raw, int64(start/psz*8)); err != nil && err != io.EOF {
		return nil, err
	}
	out := make([]bool, n)
	for i := range out {
		out[i] = binary.LittleEndian.Uint64(raw[i*8:])&(1<<63) != 0
	}
	return out, nil
}

// clearRefs clears the referenced bits of this process's pages
// (/proc/self/clear_refs), so that fileReferenced counts the pages used
// from then on.
func clearRefs() error { return os.WriteFile("/proc/self/clear_refs", []byte("1"), 0) }

// fileReferenced is, in bytes, what /proc/self/smaps says of this
// process's mappings of the file at path: resident, and referenced since
// the last clearRefs (read through the mapping, or written by a commit).
func fileReferenced(path string) (rss, ref int64, err error) {
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		if !strings.HasSuffix(fields[0], ":") { // a mapping's header line
			in = len(fields) >= 6 && fields[5] == path
			continue
		}
		if !in || len(fields) < 2 {
			continue
		}
		v, _ := strconv.ParseInt(fields[1], 10, 64)
		switch fields[0] {
		case "Rss:":
			rss += v * 1024
		case "Referenced:":
			ref += v * 1024
		}
	}
	return rss, ref, sc.Err()
}
