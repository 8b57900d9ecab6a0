#!/usr/bin/python3
"""Fetch a feed with feedparser and compare it with what slogfeed expects.

Usage: check_feedparser.py URL EXPECTED.json

EXPECTED.json is written by web/readers_test.go:

    {"feed_title": "...", "version": "rss20",
     "entries": [{"title": "...", "id": "...",
                  "published": "2026-11-21T19:00:00Z",
                  "updated": "2026-11-21T19:00:30Z"}, ...]}

"updated" is optional (checked when present). The script also fetches the
feed again with the ETag and then with the Last-Modified date of the first
answer, and wants 304 Not Modified both times. It exits 0 when everything
matches, 1 with one line per mismatch on stderr, 2 on bad usage.
"""
import json
import sys
import time

import feedparser


def iso(parsed):
    """Formats a feedparser time tuple (UTC) as RFC 3339."""
    if parsed is None:
        return None
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", parsed)


def check(url, expected):
    errors = []
    d = feedparser.parse(url)
    if d.get("bozo"):
        errors.append("bozo: %r" % (d.get("bozo_exception"),))
    if d.get("status") != 200:
        errors.append("status %r, want 200" % (d.get("status"),))
    if d.get("version") != expected["version"]:
        errors.append("version %r, want %r" % (d.get("version"), expected["version"]))
    if d.feed.get("title") != expected["feed_title"]:
        errors.append("feed title %r, want %r" % (d.feed.get("title"), expected["feed_title"]))
    want = expected["entries"]
    if len(d.entries) != len(want):
        errors.append("%d entries, want %d" % (len(d.entries), len(want)))
    for i, (got, exp) in enumerate(zip(d.entries, want)):
        if got.get("title") != exp["title"]:
            errors.append("entry %d: title %r, want %r" % (i, got.get("title"), exp["title"]))
        if got.get("id") != exp["id"]:
            errors.append("entry %d: id %r, want %r" % (i, got.get("id"), exp["id"]))
        pub = iso(got.get("published_parsed"))
        if pub != exp["published"]:
            errors.append("entry %d: published %r, want %r" % (i, pub, exp["published"]))
        if "updated" in exp:
            upd = iso(got.get("updated_parsed"))
            if upd != exp["updated"]:
                errors.append("entry %d: updated %r, want %r" % (i, upd, exp["updated"]))

    # A reader that remembers the validators gets 304 Not Modified.
    etag, modified = d.get("etag"), d.get("modified")
    if not etag:
        errors.append("no ETag")
    else:
        again = feedparser.parse(url, etag=etag)
        if again.get("status") != 304:
            errors.append("with If-None-Match: status %r, want 304" % (again.get("status"),))
    if not modified:
        errors.append("no Last-Modified")
    else:
        again = feedparser.parse(url, modified=modified)
        if again.get("status") != 304:
            errors.append("with If-Modified-Since: status %r, want 304" % (again.get("status"),))
    return errors


def main(argv):
    if len(argv) != 3:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    with open(argv[2], encoding="utf-8") as f:
        expected = json.load(f)
    errors = check(argv[1], expected)
    for e in errors:
        print("feedparser %s: %s" % (argv[1], e), file=sys.stderr)
    if errors:
        return 1
    print("feedparser %s: %d entries as expected" % (argv[1], len(expected["entries"])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
