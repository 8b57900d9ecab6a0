#!/usr/bin/python3
"""Print the items newsboat stored in its cache, as JSON.

Usage: newsboat_items.py CACHE.db

Prints one JSON array of {"feedurl", "guid", "title", "pubdate"} objects
(pubdate in Unix seconds), in the cache's order, for web/readers_test.go
to compare. Exits 2 on bad usage or an unreadable cache.
"""
import json
import sqlite3
import sys


def main(argv):
    if len(argv) != 2:
        print("usage: newsboat_items.py CACHE.db", file=sys.stderr)
        return 2
    try:
        db = sqlite3.connect("file:%s?mode=ro" % argv[1], uri=True)
        rows = db.execute(
            "SELECT feedurl, guid, title, pubDate FROM rss_item ORDER BY id"
        ).fetchall()
    except sqlite3.Error as e:
        print("newsboat cache %s: %s" % (argv[1], e), file=sys.stderr)
        return 2
    json.dump(
        [{"feedurl": u, "guid": g, "title": t, "pubdate": p} for u, g, t, p in rows],
        sys.stdout,
        ensure_ascii=False,
    )
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
