package jetstream

import (
	"fmt"

	"github.com/klauspost/compress/s2"

	"github.com/slogfeed/slogfeed/storage"
)

// Compressed feed records.
//
// A feed record (its value in the defs bucket) is its JSON encoding,
// stored as it is or compressed with S2 (github.com/klauspost/compress/s2)
// behind a one-byte tag. A poll rewrites its feed's record, and each
// rewrite makes the server load the block holding the record's previous
// revision (the compare-and-set's check and the removal of the old
// value): with feeds polled in no particular order, every block of the
// bucket's stream stays in the server's block cache, so the bucket's size
// is memory on every server. Compressed, a record with its policy state
// takes about half its JSON size (a 100,000-feed fleet: 893 B of JSON, 467 B
// compressed), and the bucket's cached blocks shrink with it.
//
// Readers take both forms (unpackRecord), so records written before
// compression, or by a node that does not compress, stay readable; a
// record is compressed only when that makes it smaller. A Store
// compresses when its gate allows it (SetRecordCompression): on a
// cluster, once every member has said for an hour that it reads
// compressed records (lease.Node.AllHave), so that a rolling upgrade, or
// an older node restarted meanwhile, never leaves a node of an older
// version unable to read a record.

// recordS2 tags a compressed record. A JSON record starts with '{'.
const recordS2 byte = 0x01

// FeatureCompressedRecords names, among the features a cluster member
// advertises, the reading of compressed feed records.
const FeatureCompressedRecords = "records-s2"

// packRecord returns the stored form of a record's JSON encoding data:
// compressed when compress is set and that is smaller, else data. A
// record already compressed is returned as it is.
func packRecord(data []byte, compress bool) []byte {
	if !compress || len(data) < minPacked || data[0] == recordS2 {
		return data
	}
	out := make([]byte, 1, 1+s2.MaxEncodedLen(len(data)))
	out[0] = recordS2
	out = append(out, s2.Encode(out[1:cap(out)], data)...)
	if len(out) >= len(data) {
		return data
	}
	return out
}

// PackRecord is the value a Store that compresses records stores for a
// feed record's JSON encoding data: for tools that write the defs bucket
// directly (the benchmarks' fleet writers).
func PackRecord(data []byte) []byte { return packRecord(data, true) }

// minPacked is the JSON length below which a record is stored as it is:
// short records gain nothing worth the decoding.
const minPacked = 128

// unpackRecord returns the JSON encoding of a stored record: data itself
// when it does not start with the tag (JSON, which its decoder checks),
// else its decompression, refused (storage.ErrCorrupt) when the block is
// not valid S2 or would decode to more than storage.MaxFeedSize bytes.
func unpackRecord(data []byte) ([]byte, error) {
	if len(data) == 0 || data[0] != recordS2 {
		return data, nil
	}
	n, err := s2.DecodedLen(data[1:])
	if err != nil {
		return nil, fmt.Errorf("%w: compressed record: %v", storage.ErrCorrupt, err)
	}
	if n > storage.MaxFeedSize {
		return nil, fmt.Errorf("%w: compressed record of %d bytes decoded", storage.ErrCorrupt, n)
	}
	out, err := s2.Decode(make([]byte, n), data[1:])
	if err != nil {
		return nil, fmt.Errorf("%w: compressed record: %v", storage.ErrCorrupt, err)
	}
	return out, nil
}

// SetRecordCompression sets the gate a Store asks before compressing a
// record it writes: nil (the default) compresses every record; a cluster
// member passes a gate that opens once every member of the cluster
// has advertised FeatureCompressedRecords for an hour (member.Attach). The gate is asked on
// every record write and must be cheap.
func (s *Store) SetRecordCompression(allow func() bool) {
	if allow == nil {
		s.compressGate.Store(nil)
		return
	}
	s.compressGate.Store(&allow)
}

// compressRecords reports whether a record written now is compressed.
func (s *Store) compressRecords() bool {
	g := s.compressGate.Load()
	return g == nil || (*g)()
}
