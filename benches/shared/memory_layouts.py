#!/usr/bin/env python3
"""Redis memory of candidate layouts for a shared crawl's queue and seen set
(issue 25, item 8), without the crawler: 200,000 links as
benches/shared/calls.rs makes them (URLs of 42-47 bytes, referer
http://a.test/), written with redis-cli --pipe into an empty database.

Usage: python3 memory_layouts.py LAYOUT | redis-cli -p PORT --pipe, with
used_memory (INFO memory) read before and after, on a FLUSHALLed server.
Layouts:
  zset        sorted set, member = 8-byte sequence + 20-byte fingerprint + bincode request (today's)
  list        the same member in a list (RPUSH)
  list_noref  the same without the referer in the request
  seen20      set of 20-byte fingerprints (today's seen set)
  seen12      set of 12-byte fingerprint prefixes
  hbucketB    2^B hashes (listpack), field = 16 bytes of fingerprint, empty value
"""
import hashlib
import sys

N = 200_000
kind = sys.argv[1]
out = sys.stdout.buffer


def cmd(*args):
    out.write(b"*%d\r\n" % len(args))
    for a in args:
        out.write(b"$%d\r\n%s\r\n" % (len(a), a))


REFERER = b"\x01\x0ehttp://a.test/"
for i in range(N):
    url = b"http://a.test/articles/2026/12/page-%d.html" % i
    fp = hashlib.sha1(url).digest()
    # Version byte, method, url, body, headers, depth, priority, dont_filter,
    # referer, retries, redirects, meta: Request::encode's layout.
    body = b"\x01\x03GET" + bytes([len(url)]) + url + b"\x00\x00\x01\x00\x00" + REFERER + b"\x00\x00\x00"
    member = i.to_bytes(8, "big") + fp + body
    if kind == "zset":
        cmd(b"ZADD", b"q", b"0", member)
    elif kind == "list":
        cmd(b"RPUSH", b"q", member)
    elif kind == "list_noref":
        cmd(b"RPUSH", b"q", member.replace(REFERER, b"\x00"))
    elif kind == "seen20":
        cmd(b"SADD", b"seen", fp)
    elif kind == "seen12":
        cmd(b"SADD", b"seen", fp[:12])
    elif kind.startswith("hbucket"):
        bits = int(kind[len("hbucket"):])
        bucket = int.from_bytes(fp[:4], "big") >> (32 - bits)
        cmd(b"HSET", b"s:%d" % bucket, fp[:16], b"")
    else:
        sys.exit(f"unknown layout {kind}")
