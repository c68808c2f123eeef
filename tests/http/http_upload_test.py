#!/usr/bin/env python3
"""The HTTP path of fedagg-server (docs/PROTOCOL.md section 4a) without a browser.

Run by http_upload_test.sh, which starts the servers and writes the configuration this
reads (a JSON file, the only argument; --only=WORD runs the scenarios whose name holds
WORD). Four nodes:

- root: a root whose --http_address is its --metrics_address (one listener for both);
- intermediate: an intermediate aggregator under root, with an HTTP port of its own;
- aux-root: a root with bearer tokens, --upload_idle_timeout=2s, --max_streams_per_identity=4,
  --ingest_window_mib=1 and --max_update_mib=4;
- aux-intermediate: an intermediate under aux-root with the same tokens, idle timeout and
  stream limit, and --memory_budget_bytes=8388608.

Every rule of the section is played on root and intermediate (tasks, start, header
conflicts, start refusals, writes in 1 MiB and odd-sized chunks across the sections of a
dense float32, a sparse (int64 indices) and a float64 field, repeats, overlaps, gaps,
overruns, bad checksums, the 16 MiB chunk limit, missing headers, submit before complete,
a bad whole-update checksum, repeated submits and chunks, DELETE, the same client over gRPC
with fedagg-client, results as JSON and raw parts against NumPy and against fedagg-client's
result, unknown paths and methods, the JavaScript client); tokens, expiry, the stream
limit, the ingest window (WAITING), the update size limit and the memory budget on the aux
nodes. Checks do not stop at the first failure: each failed check is printed with the
request, what was expected and what came back, and the run exits 1 if any failed.

Only the standard library and NumPy (run it with /usr/bin/python3).
"""

import http.client
import json
import os
import re
import select
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import urllib.parse

import numpy as np

# ---------------------------------------------------------------------------------------
# CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), table-driven.


def _crc32c_table():
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_CRC_TABLE = _crc32c_table()


def crc32c(data, crc=0):
    crc ^= 0xFFFFFFFF
    table = _CRC_TABLE
    for byte in data:
        crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


assert crc32c(b"123456789") == 0xE3069283, "CRC-32C check value"
assert crc32c(b"") == 0

# ---------------------------------------------------------------------------------------
# Checks that record failures and go on.

HTTP_STATUS = {
    "INVALID_ARGUMENT": 400, "FAILED_PRECONDITION": 400, "OUT_OF_RANGE": 400,
    "UNAUTHENTICATED": 401, "PERMISSION_DENIED": 403, "NOT_FOUND": 404,
    "ALREADY_EXISTS": 409, "ABORTED": 409, "RESOURCE_EXHAUSTED": 429, "CANCELLED": 499,
    "UNIMPLEMENTED": 501, "UNAVAILABLE": 503, "DEADLINE_EXCEEDED": 504, "INTERNAL": 500,
    "UNKNOWN": 500, "DATA_LOSS": 500,
}
MIB = 1 << 20
MAX_CHUNK = 16 * MIB
UNAUTH_MISSING = ("missing 'authorization' header: send 'Bearer <token>' with a token this "
                  "server accepts")
UNAUTH_WRONG = "the bearer token is not accepted by this server"


class Failure(Exception):
    """A check a scenario cannot go on without."""


class Checks:
    def __init__(self):
        self.failures = []
        self.count = 0
        self.scenario = "-"

    def check(self, cond, what, detail=""):
        self.count += 1
        if not cond:
            msg = "[%s] %s%s" % (self.scenario, what, (" -- got: " + detail) if detail else "")
            self.failures.append(msg)
            print("FAIL " + msg, flush=True)
        return bool(cond)


CHECKS = Checks()


def check(cond, what, detail=""):
    return CHECKS.check(cond, what, detail)


def require(cond, what, detail=""):
    if not CHECKS.check(cond, what, detail):
        raise Failure(what)


# ---------------------------------------------------------------------------------------
# HTTP.

DEFAULT = object()


class Resp:
    def __init__(self, status, headers, body, what):
        self.status = status
        self.headers = headers
        self.body = body
        self.what = what
        self.json = None
        if body[:1] in (b"{", b"["):
            try:
                self.json = json.loads(body)
            except ValueError:
                pass

    def brief(self):
        text = self.body[:400].decode("utf-8", "replace")
        return "HTTP %d %s%s" % (self.status, text, "..." if len(self.body) > 400 else "")


class Node:
    def __init__(self, cfg, client, tmp):
        self.name = cfg["name"]
        self.role = cfg["role"]
        self.grpc = cfg["grpc"]
        self.http = cfg["http"]
        self.token = cfg.get("token")
        self.token_file = cfg.get("token_file")
        self.other_token = cfg.get("other_token")
        self.idle_timeout_s = cfg.get("idle_timeout_s", 300)
        self.shared_metrics = cfg.get("shared_metrics", False)
        self.client = client
        self.tmp = tmp
        self.root = self  # set for intermediates by main()
        self.root_name = cfg.get("root")

    def request(self, method, path, query=None, body=None, headers=None, token=DEFAULT,
                timeout=60):
        url = path + ("?" + urllib.parse.urlencode(query) if query else "")
        hdrs = dict(headers or {})
        tok = self.token if token is DEFAULT else token
        if tok is not None and "Authorization" not in hdrs:
            hdrs["Authorization"] = "Bearer " + tok
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode()
            hdrs.setdefault("Content-Type", "application/json")
        what = "%s %s (%s)" % (method, url, self.name)
        conn = http.client.HTTPConnection("127.0.0.1", self.http, timeout=timeout)
        try:
            try:
                conn.request(method, url, body=body, headers=hdrs)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the server answered before reading the whole body: read its answer
            r = conn.getresponse()
            data = r.read()
            return Resp(r.status, {k.lower(): v for k, v in r.getheaders()}, data, what)
        finally:
            conn.close()

    def cli(self, *args, timeout=120, token_file=DEFAULT):
        cmd = [self.client, "--server=127.0.0.1:%d" % self.grpc]
        tf = self.token_file if token_file is DEFAULT else token_file
        if tf:
            cmd.append("--token_file=" + tf)
        cmd += list(args)
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def cli_error(p):
    """(code, message) of a fedagg-client refusal: 'fedagg-client: CODE: message'."""
    m = re.search(r"fedagg-client: ([A-Z_]+): (.*)", p.stderr, re.S)
    return (m.group(1), m.group(2).strip()) if m else (None, p.stderr.strip())


def i64(obj, key, ctx):
    """A 64-bit integer of a JSON answer: a decimal string in protobuf's JSON mapping
    (absent: 0, the default value)."""
    if not isinstance(obj, dict):
        check(False, "%s: an object holding %s" % (ctx, key), repr(obj)[:300])
        return None
    if key not in obj:
        return 0
    v = obj[key]
    check(isinstance(v, str) and re.fullmatch(r"-?\d+", v) is not None,
          "%s: %s is a 64-bit integer, written as a string" % (ctx, key), repr(v))
    try:
        return int(v)
    except (TypeError, ValueError):
        return None


def is_json(r):
    return r.headers.get("content-type", "").split(";")[0].strip() == "application/json"


def expect_ok(r, ctx, status, state=None, committed=None, total=None):
    """An UploadStatus (or other message) answered with HTTP `status`."""
    good = check(r.status == status, "%s: %s answers HTTP %d" % (ctx, r.what, status), r.brief())
    check(isinstance(r.json, dict), "%s: %s answers a JSON object" % (ctx, r.what), r.brief())
    check(is_json(r), "%s: %s has Content-Type application/json" % (ctx, r.what),
          r.headers.get("content-type", "(none)"))
    j = r.json if isinstance(r.json, dict) else {}
    if state is not None:
        good &= check(j.get("state") == state, "%s: %s answers state %s" % (ctx, r.what, state),
                      r.brief())
    if committed is not None:
        good &= check(i64(j, "committedSize", ctx) == committed,
                      "%s: %s answers committedSize %d" % (ctx, r.what, committed), r.brief())
    if total is not None:
        good &= check(i64(j, "totalSize", ctx) == total,
                      "%s: %s answers totalSize %d" % (ctx, r.what, total), r.brief())
    return j if good else None


def expect_error(r, ctx, code, committed=None, message=None, status=None):
    """An HttpError: the HTTP status of `code`, {"code": code, "message": ..., committedSize}.
    `message`: the exact text, or a compiled pattern it must match in full."""
    status = status or HTTP_STATUS[code]
    good = check(r.status == status, "%s: %s answers HTTP %d %s" % (ctx, r.what, status, code),
                 r.brief())
    j = r.json if isinstance(r.json, dict) else {}
    good &= check(j.get("code") == code, "%s: %s answers an HttpError with code %s" %
                  (ctx, r.what, code), r.brief())
    check(is_json(r), "%s: %s has Content-Type application/json" % (ctx, r.what),
          r.headers.get("content-type", "(none)"))
    msg = j.get("message")
    check(isinstance(msg, str) and msg != "", "%s: %s's HttpError has a message" % (ctx, r.what),
          r.brief())
    if committed is not None:
        good &= check(i64(j, "committedSize", ctx) == committed,
                      "%s: %s's HttpError carries committedSize %d" % (ctx, r.what, committed),
                      r.brief())
    if message is not None and isinstance(msg, str):
        if isinstance(message, re.Pattern):
            good &= check(message.fullmatch(msg) is not None,
                          "%s: %s's message matches /%s/" % (ctx, r.what, message.pattern), msg)
        else:
            good &= check(msg == message, "%s: %s's message is %r" % (ctx, r.what, message), msg)
    return good


# ---------------------------------------------------------------------------------------
# Uploads.
#
# An upload refused at submit is FAILED and holds no bytes: its errors carry committedSize
# 0 (the section's "committedSize where an upload exists"; a POST starts it over at 0).


class Update:
    """One update: its sections in wire order, its header, the arrays it holds."""

    def __init__(self, sections, header, arrays=None):
        self.sections = [bytes(s) for s in sections]
        self.data = b"".join(self.sections)
        self.total = len(self.data)
        self.header = header
        self.arrays = arrays or {}
        self.boundaries = []
        pos = 0
        for s in self.sections:
            pos += len(s)
            self.boundaries.append(pos)
        self._crc = None
        self._chunk_crc = {}

    @property
    def crc(self):
        if self._crc is None:
            self._crc = crc32c(self.data)
        return self._crc

    def chunk_crc(self, a, b):
        if (a, b) not in self._chunk_crc:
            self._chunk_crc[(a, b)] = crc32c(self.data[a:b])
        return self._chunk_crc[(a, b)]


def cuts_every(total, size):
    return [(a, min(a + size, total)) for a in range(0, total, size)]


def cuts_odd(upd, rng):
    """Chunks of odd sizes, cut 1 byte before, at and after every section boundary and at
    random points in between."""
    points = set()
    for b in upd.boundaries[:-1]:
        points.update((b - 1, b, b + 1))
    points.update(int(x) for x in rng.integers(1, upd.total, 12))
    points.update((1, 2, 7))
    points = sorted(p for p in points if 0 < p < upd.total)
    edges = [0] + points + [upd.total]
    return [(a, b) for a, b in zip(edges, edges[1:]) if b > a]


class Uploads:
    """The upload requests of one aggregation at one node."""

    def __init__(self, node, agg):
        self.node = node
        self.agg = agg

    def q(self, client):
        return {"aggregation_id": self.agg, "client_id": client}

    def start(self, client, header, **kw):
        return self.node.request("POST", "/v1/uploads", self.q(client), body=header, **kw)

    def get(self, client, **kw):
        return self.node.request("GET", "/v1/uploads", self.q(client), **kw)

    def patch(self, client, offset, body, crc=None, omit=(), **kw):
        headers = {"Content-Type": "application/octet-stream"}
        if "offset" not in omit:
            headers["Upload-Offset"] = str(offset)
        if "crc" not in omit:
            headers["Upload-Crc32c"] = str(crc32c(body) if crc is None else crc)
        return self.node.request("PATCH", "/v1/uploads", self.q(client), body=body,
                                 headers=headers, **kw)

    def patch_upd(self, client, upd, a, b, **kw):
        return self.patch(client, a, upd.data[a:b], crc=upd.chunk_crc(a, b), **kw)

    def submit(self, client, crc, **kw):
        return self.node.request("POST", "/v1/uploads:submit", self.q(client),
                                 body={"crc32c": crc}, **kw)

    def delete(self, client, **kw):
        return self.node.request("DELETE", "/v1/uploads", self.q(client), **kw)


def start_retrying(up, client, header, **kw):
    """POST /v1/uploads, repeated while an intermediate answers UNAVAILABLE (the
    aggregation not joined at the parent yet: 'send it again shortly') or the answer is
    WAITING (202). Returns the last answer."""
    deadline = time.time() + 30
    while True:
        r = up.start(client, header, **kw)
        j = r.json if isinstance(r.json, dict) else {}
        again = (r.status == 503 and j.get("code") == "UNAVAILABLE") or \
                (r.status == 202 and j.get("state") == "WAITING")
        if not again or time.time() > deadline:
            return r
        time.sleep(0.2)


def upload(up, client, upd, cuts, ctx, start_status=201, committed_before=0):
    """Start (when start_status is set) and write every chunk of `cuts`; each answer must
    be OPEN with the new committed size."""
    if start_status is not None:
        r = start_retrying(up, client, upd.header)
        require(expect_ok(r, ctx + " start", start_status, "OPEN", committed_before, upd.total)
                is not None, "%s: the upload of %s starts" % (ctx, client))
    for a, b in cuts:
        r = up.patch_upd(client, upd, a, b)
        require(expect_ok(r, ctx, 200, "OPEN", b) is not None,
                "%s: %s writes [%d, %d)" % (ctx, client, a, b))


def submit_counted(up, client, upd, ctx, contributions=None):
    """Submit with the right checksum: 200 COUNTED with an ack for this aggregation."""
    r = up.submit(client, upd.crc)
    j = expect_ok(r, ctx + " submit", 200, "COUNTED")
    require(j is not None, "%s: %s is COUNTED" % (ctx, client))
    ack = j.get("ack")
    require(isinstance(ack, dict), "%s: the COUNTED answer carries an ack" % ctx, r.brief())
    check(ack.get("aggregationId") == up.agg, "%s: ack.aggregationId is %s" % (ctx, up.agg),
          r.brief())
    check(ack.get("level") == "RECEIVED", "%s: ack.level is RECEIVED" % ctx, r.brief())
    n = i64(ack, "contributions", ctx + " ack")
    if contributions is not None:
        check(n == contributions, "%s: ack.contributions is %d" % (ctx, contributions), r.brief())
    else:
        check(n is not None and n >= 1, "%s: ack.contributions >= 1" % ctx, r.brief())
    return j


def full_upload(up, client, upd, ctx, cuts=None, contributions=None, start_status=201):
    upload(up, client, upd, cuts or cuts_every(upd.total, MIB), ctx, start_status)
    return submit_counted(up, client, upd, ctx, contributions)


def aggregation(node, agg):
    r = node.request("GET", "/v1/aggregations", {"aggregation_id": agg})
    return r


def contributions(node, agg, ctx):
    r = aggregation(node, agg)
    j = expect_ok(r, ctx + " GET /v1/aggregations", 200)
    return i64(j, "contributions", ctx) if j is not None else None


def wait_state(node, agg, states, ctx, timeout=60):
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        r = aggregation(node, agg)
        last = r
        if r.status == 200 and isinstance(r.json, dict) and r.json.get("state") in states:
            return r.json
        time.sleep(0.1)
    check(False, "%s: %s reaches %s at %s" % (ctx, agg, "/".join(states), node.name),
          last.brief() if last else "")
    return None


def raw_oversize_patch(node, query, offset, length):
    """A PATCH declaring a body of `length` bytes: headers first; the body only when no
    answer came within 3 s. Returns (Resp, answered before the body was sent)."""
    s = socket.create_connection(("127.0.0.1", node.http), timeout=60)
    try:
        lines = ["PATCH /v1/uploads?%s HTTP/1.1" % urllib.parse.urlencode(query),
                 "Host: 127.0.0.1:%d" % node.http, "Content-Length: %d" % length,
                 "Content-Type: application/octet-stream", "Upload-Offset: %d" % offset,
                 "Upload-Crc32c: 0", "Connection: close"]
        if node.token:
            lines.append("Authorization: Bearer " + node.token)
        s.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        readable, _, _ = select.select([s], [], [], 3)
        before = bool(readable)
        if not before:
            block = bytes(MIB)
            try:
                sent = 0
                while sent < length:
                    n = min(len(block), length - sent)
                    s.sendall(block[:n])
                    sent += n
            except (BrokenPipeError, ConnectionResetError):
                pass
        resp = http.client.HTTPResponse(s, method="PATCH")
        resp.begin()
        body = resp.read()
        r = Resp(resp.status, {k.lower(): v for k, v in resp.getheaders()}, body,
                 "PATCH /v1/uploads with Content-Length %d (%s)" % (length, node.name))
        return r, before
    finally:
        s.close()


# ---------------------------------------------------------------------------------------
# Updates of the aggregations used below.

MULTI_N1, MULTI_N2, MULTI_N3 = 250_001, 2_000_000, 100_003
MULTI_NNZ = 60_007
MULTI_TYPE = "<w=float32[%d],s=float32[%d],d=float64[%d]>" % (MULTI_N1, MULTI_N2, MULTI_N3)
MULTI_INTRINSICS = "federated_sum,sparse_sum_sparse+counts,federated_mean"


def multi_update(rng, nnz=MULTI_NNZ):
    """w: integers in [-100, 100] (float32 sums exact in any order); s: distinct indices
    among the first 200,000, unsorted, values multiples of 0.5; d: normal float64."""
    w = rng.integers(-100, 101, MULTI_N1).astype("<f4")
    idx = rng.choice(200_000, nnz, replace=False).astype("<i8")
    vals = (rng.integers(-100, 101, nnz) / 2).astype("<f4")
    d = rng.standard_normal(MULTI_N3).astype("<f8")
    header = {"fields": [{}, {"nnz": str(nnz)}, {}]}
    return Update([w.tobytes(), idx.tobytes(), vals.tobytes(), d.tobytes()], header,
                  {"w": w, "idx": idx, "vals": vals, "d": d})


def expected_multi(updates):
    w = np.sum([u.arrays["w"].astype(np.float64) for u in updates], axis=0).astype(np.float32)
    idx = np.concatenate([u.arrays["idx"] for u in updates])
    vals = np.concatenate([u.arrays["vals"].astype(np.float64) for u in updates])
    uniq, inverse = np.unique(idx, return_inverse=True)
    sums = np.zeros(len(uniq))
    np.add.at(sums, inverse, vals)
    counts = np.bincount(inverse, minlength=len(uniq)).astype(np.int64)
    d = np.sum([u.arrays["d"] for u in updates], axis=0) / len(updates)
    return {"w": w, "s_indices": uniq.astype(np.int64), "s_values": sums.astype(np.float32),
            "s_counts": counts, "d": d}


def small_update(values, dtype="<f4"):
    arr = np.asarray(values, dtype=dtype)
    return Update([arr.tobytes()], {"fields": [{}]}, {"x": arr})


def grpc_submit_multi(node, agg, client, upd):
    """fedagg-client submit of a multi update (Submit over gRPC). Returns the process."""
    d = tempfile.mkdtemp(dir=node.tmp)
    np.save(os.path.join(d, "w.npy"), upd.arrays["w"])
    np.save(os.path.join(d, "i.npy"), upd.arrays["idx"])
    np.save(os.path.join(d, "v.npy"), upd.arrays["vals"])
    np.save(os.path.join(d, "d.npy"), upd.arrays["d"])
    return node.cli("submit", agg, "--client_id=" + client, "w=%s/w.npy" % d,
                    "s.indices=%s/i.npy" % d, "s.values=%s/v.npy" % d, "d=%s/d.npy" % d)


def grpc_submit_small(node, agg, client, values):
    path = os.path.join(tempfile.mkdtemp(dir=node.tmp), "x.npy")
    np.save(path, np.asarray(values, dtype=np.float32))
    return node.cli("submit", agg, "--client_id=" + client, "x=" + path)


def already_message(client, agg):
    return ("client '%s' already contributed to aggregation '%s'; its update is counted once"
            % (client, agg))


def not_delivered(client, agg):
    """The claim's refusal at the root while an intermediate holds the client's update."""
    return re.compile(
        r"the update of client '%s' to aggregation '%s' was acknowledged by another aggregator "
        r"\(child '.*' of this one\), which has not delivered it yet; retry shortly: once "
        r"delivered it is counted \(a retry is then refused ALREADY_EXISTS\), and if that "
        r"aggregator is lost the update is accepted again" % (re.escape(client), re.escape(agg)))


def expect_refused_as_counted(node, up, client, upd, ctx):
    """A client already counted in the aggregation. A root refuses its start
    ALREADY_EXISTS. An intermediate takes the start, as its Submit takes the header (it
    learns that the client was counted from the claim at the root, section 6.4), and
    refuses the submit: ALREADY_EXISTS, or ABORTED while the intermediate that acked the
    first update has not delivered it; the upload is FAILED and nothing is counted."""
    r = up.start(client, upd.header)
    if node.role == "root":
        expect_error(r, ctx, "ALREADY_EXISTS", message=already_message(client, up.agg))
        return
    expect_ok(r, ctx + " (intermediate: the start is taken, as its Submit's header)", 201,
              "OPEN", 0)
    before = contributions(node, up.agg, ctx)
    upload(up, client, upd, [(0, upd.total)], ctx, start_status=None)
    r = up.submit(client, upd.crc)
    if isinstance(r.json, dict) and r.json.get("code") == "ABORTED":
        expect_error(r, ctx + " submit (claim held)", "ABORTED",
                     message=not_delivered(client, up.agg), committed=0)
    else:
        expect_error(r, ctx + " submit", "ALREADY_EXISTS", message=already_message(client, up.agg),
                     committed=0)
    expect_ok(up.get(client), ctx + " GET", 200, "FAILED", 0)
    check(contributions(node, up.agg, ctx) == before, "%s: nothing counted" % ctx)


def create(root, agg, vtype, intrinsics, *flags):
    p = root.cli("create", agg, "--type=" + vtype, "--intrinsics=" + intrinsics, *flags)
    require(p.returncode == 0, "create %s at %s with fedagg-client" % (agg, root.name),
            p.stderr)


def seal(root, agg):
    p = root.cli("seal", agg, timeout=120)
    check(p.returncode == 0, "fedagg-client seal %s" % agg, p.stderr)


def wait_mirrored(node, agg, ctx):
    """Until the node knows the aggregation (an intermediate learns it from its parent)."""
    deadline = time.time() + 30
    while time.time() < deadline:
        if aggregation(node, agg).status == 200:
            return
        time.sleep(0.1)
    check(False, "%s: %s knows %s" % (ctx, node.name, agg))


# ---------------------------------------------------------------------------------------
# Scenarios on root and intermediate.


def s_tasks(node):
    root, ctx = node.root, "tasks"
    ids = ["%s-tasks-a" % node.name, "%s-tasks-b" % node.name]
    for agg in ids:
        create(root, agg, "<x=float32[4]>", "federated_sum")
    # The intermediate learns them from its parent.
    deadline = time.time() + 30
    while True:
        r = node.request("GET", "/v1/tasks", {"client_id": "t-1", "max_tasks": 64})
        listed = [t.get("aggregationId") for t in (r.json or {}).get("tasks", [])] \
            if isinstance(r.json, dict) else []
        if all(a in listed for a in ids) or time.time() > deadline:
            break
        time.sleep(0.1)
    j = expect_ok(r, ctx, 200)
    require(j is not None, "GET /v1/tasks answers")
    check(j.get("protocolVersion") == 1, "GET /v1/tasks: protocolVersion is 1 (a number)",
          r.brief())
    require(all(a in listed for a in ids), "GET /v1/tasks lists both open aggregations",
            str(listed))
    check(listed.index(ids[0]) < listed.index(ids[1]), "GET /v1/tasks: oldest first", str(listed))
    for t in j["tasks"]:
        if t.get("aggregationId") in ids:
            a = aggregation(node, t["aggregationId"])
            spec = (a.json or {}).get("spec") if isinstance(a.json, dict) else None
            check(spec == t, "GET /v1/tasks: the task is the spec of GET /v1/aggregations",
                  "%s vs %s" % (json.dumps(t)[:300], json.dumps(spec)[:300]))
            check(t.get("intrinsics", [{}])[0].get("intrinsic") == "FEDERATED_SUM",
                  "GET /v1/tasks: intrinsics by enum name", json.dumps(t)[:300])
    # max_tasks: absent and 0 mean 1; 2 gives 2, the oldest first.
    for query, n in (({"client_id": "t-1"}, 1), ({"client_id": "t-1", "max_tasks": 0}, 1),
                     ({"client_id": "t-1", "max_tasks": 2}, 2)):
        r = node.request("GET", "/v1/tasks", query)
        jj = expect_ok(r, ctx, 200)
        tasks = (jj or {}).get("tasks", [])
        check(len(tasks) == n, "GET /v1/tasks?%s answers %d task(s)" % (
            urllib.parse.urlencode(query), n), r.brief())
        check([t.get("aggregationId") for t in tasks] == listed[:n],
              "GET /v1/tasks?%s answers the oldest open ones" % urllib.parse.urlencode(query),
              str([t.get("aggregationId") for t in tasks]))
    # A client that contributed to ids[0] here no longer gets it; another still does.
    full_upload(Uploads(node, ids[0]), "t-1", small_update([1, 2, 3, 4]), ctx)
    for client, expect in (("t-1", [ids[1]]), ("t-2", ids)):
        r = node.request("GET", "/v1/tasks", {"client_id": client, "max_tasks": 64})
        got = [t.get("aggregationId") for t in (r.json or {}).get("tasks", [])] \
            if isinstance(r.json, dict) else []
        check([a for a in got if a in ids] == expect,
              "GET /v1/tasks for %s lists %s of the two" % (client, expect), str(got))
    for agg in ids:
        root.cli("cancel", agg)


def s_start_refusals(node):
    """Start checks as for Submit (section 3.2), and unknown uploads."""
    root, ctx = node.root, "start refusals"
    agg = "%s-small" % node.name
    create(root, agg, "<x=float32[4],s=float32[100]>", "federated_sum,sparse_sum")
    wait_mirrored(node, agg, ctx)
    up = Uploads(node, agg)
    good = {"fields": [{}, {"nnz": "2"}]}
    r = start_retrying(Uploads(node, "no-such-aggregation"), "r-1", good)
    expect_error(r, ctx, "NOT_FOUND", message=re.compile(
        r"no aggregation 'no-such-aggregation' on this server \(never created here, or finished "
        r"and forgotten: .*", re.S))
    # Make sure the node has joined before refusals that come later in the checks.
    r = start_retrying(up, "r-join", good)
    expect_ok(r, ctx, 201, "OPEN", 0, 16 + 8 * 2 + 4 * 2)
    expect_ok(up.delete("r-join"), ctx, 200, "ABORTED")
    expect_error(up.start("r-2", {"fields": [{}]}), ctx, "INVALID_ARGUMENT",
                 message=re.compile(r"update header describes 1 fields but type .* has 2"))
    expect_error(up.start("r-3", {"fields": [{"dtype": "DTYPE_FLOAT64"}, {"nnz": "2"}]}), ctx,
                 "INVALID_ARGUMENT", message=re.compile(
                     r"field 'x' \(.*\): sent dtype DTYPE_FLOAT64, declared float32; convert the "
                     r"values before sending"))
    expect_error(up.start("r-4", {"fields": [{}, {"nnz": "-1"}]}), ctx, "INVALID_ARGUMENT",
                 message="field 's': nnz -1 is negative")
    durable = ("DURABLE acks were asked for, but this server runs without checkpoints "
               "(--checkpoint_dir is not set); ask for RECEIVED acks, or restart the server "
               "with --checkpoint_dir") if node.role == "root" else (
        "DURABLE acks were asked for, but no checkpoint holds what this intermediate aggregator "
        "forwards (its root runs without --checkpoint_dir); ask for RECEIVED acks here, or "
        "contribute under a root that runs with --checkpoint_dir")
    expect_error(up.start("r-5", dict(good, ackLevel="DURABLE")), ctx, "FAILED_PRECONDITION",
                 message=durable)
    # The body's ids, when present, must equal the query's (refusal code: our reading).
    expect_ok(up.start("r-6", dict(good, aggregationId=agg, clientId="r-6")), ctx, 201, "OPEN", 0)
    expect_ok(up.delete("r-6"), ctx, 200, "ABORTED")
    expect_error(up.start("r-7", dict(good, aggregationId=agg, clientId="someone-else")), ctx,
                 "INVALID_ARGUMENT")
    expect_error(up.start("r-8", dict(good, aggregationId=agg + "-other")), ctx,
                 "INVALID_ARGUMENT")
    check(up.get("r-7").status == 404 and up.get("r-8").status == 404,
          "%s: a refused start leaves no upload" % ctx)
    # Malformed requests (codes: our reading of 'Bodies are JSON ...').
    r = node.request("POST", "/v1/uploads", up.q("r-9"), body=b"{not json",
                     headers={"Content-Type": "application/json"})
    expect_error(r, ctx + " (malformed JSON)", "INVALID_ARGUMENT")
    r = node.request("POST", "/v1/uploads", {"aggregation_id": agg}, body=good)
    expect_error(r, ctx + " (no client_id)", "INVALID_ARGUMENT")
    # Unknown uploads.
    for r in (up.get("r-none"), up.patch("r-none", 0, b"abcd"), up.submit("r-none", 0),
              up.delete("r-none")):
        expect_error(r, ctx + " (unknown upload)", "NOT_FOUND")
    # Not counted: a client already counted (over gRPC) is refused ALREADY_EXISTS.
    p = grpc_submit_small_two(node, agg, "r-grpc")
    require(p.returncode == 0, "fedagg-client submit r-grpc", p.stderr)
    x4 = np.float32([1, 2, 3, 4]).tobytes()
    expect_refused_as_counted(node, up, "r-grpc", Update(
        [x4, np.int64([1, 2]).tobytes(), np.float32([1, 2]).tobytes()], good), ctx)
    # Validation at submit: an index out of range leaves the upload FAILED; a repeated
    # submit answers the same; a POST starts it over.
    ctx = "submit refused (values)"
    x = np.float32([1, 2, 3, 4]).tobytes()
    bad = Update([x, np.int64([5, 100]).tobytes(), np.float32([1, 2]).tobytes()], good)
    fixed = Update([x, np.int64([5, 99]).tobytes(), np.float32([1, 2]).tobytes()], good)
    upload(up, "v-1", bad, [(0, bad.total)], ctx)
    before = contributions(node, agg, ctx)
    pattern = re.compile(r"field 's' \(.*\): index 100 at position 1 is out of range \[0, 100\)")
    r1 = up.submit("v-1", bad.crc)
    expect_error(r1, ctx, "INVALID_ARGUMENT", message=pattern, committed=0)
    j = expect_ok(up.get("v-1"), ctx, 200, "FAILED", 0)
    check(j is not None and "INVALID_ARGUMENT" in json.dumps(j.get("error")),
          "%s: the FAILED upload's error says INVALID_ARGUMENT" % ctx, json.dumps(j)[:300])
    r2 = up.submit("v-1", bad.crc)
    expect_error(r2, ctx + " (repeated)", "INVALID_ARGUMENT", message=pattern, committed=0)
    check(r1.json == r2.json, "%s: a repeated submit answers the first answer" % ctx,
          "%s vs %s" % (r1.brief(), r2.brief()))
    check(contributions(node, agg, ctx) == before, "%s: nothing counted" % ctx)
    r = up.start("v-1", good)
    check(r.status in (200, 201), "%s: a POST starts a FAILED upload over (200 or 201)" % ctx,
          r.brief())
    expect_ok(r, ctx, r.status, "OPEN", 0, fixed.total)
    upload(up, "v-1", fixed, [(0, fixed.total)], ctx, start_status=None)
    submit_counted(up, "v-1", fixed, ctx, before + 1)
    root.cli("cancel", agg)


def grpc_submit_small_two(node, agg, client):
    d = tempfile.mkdtemp(dir=node.tmp)
    np.save(os.path.join(d, "x.npy"), np.float32([1, 1, 1, 1]))
    np.save(os.path.join(d, "i.npy"), np.int64([3]))
    np.save(os.path.join(d, "v.npy"), np.float32([1]))
    return node.cli("submit", agg, "--client_id=" + client, "x=%s/x.npy" % d,
                    "s.indices=%s/i.npy" % d, "s.values=%s/v.npy" % d)


class MultiRun:
    """The multi-field aggregation of a node and the updates counted in it."""

    def __init__(self, node, seed):
        self.node = node
        self.root = node.root
        self.agg = "%s-multi" % node.name
        self.up = Uploads(node, self.agg)
        self.rng = np.random.default_rng(seed)
        self.counted = []


def s_multi_setup(run):
    create(run.root, run.agg, MULTI_TYPE, MULTI_INTRINSICS)
    wait_mirrored(run.node, run.agg, "multi")


def s_multi_mib(run):
    """1 MiB chunks; start answers 201 then 200 with the committed size; nothing is
    counted before submit; GET answers the same status."""
    ctx, up, c = "1 MiB chunks", run.up, "c-mib"
    upd = multi_update(run.rng)
    r = start_retrying(up, c, upd.header)
    j = expect_ok(r, ctx + " start", 201, "OPEN", 0, upd.total)
    require(j is not None, "the first start answers 201 OPEN")
    check(j.get("aggregationId") == run.agg and j.get("clientId") == c,
          "%s: UploadStatus names the aggregation and the client" % ctx, r.brief())
    check(i64(j, "maxChunkBytes", ctx) == MAX_CHUNK, "%s: maxChunkBytes is 16 MiB" % ctx,
          r.brief())
    expect_ok(up.start(c, upd.header), ctx + " start again", 200, "OPEN", 0, upd.total)
    cuts = cuts_every(upd.total, MIB)
    upload(up, c, upd, cuts[:1], ctx, start_status=None)
    expect_ok(up.start(c, upd.header), ctx + " resume", 200, "OPEN", MIB, upd.total)
    expect_ok(up.get(c), ctx + " GET", 200, "OPEN", MIB, upd.total)
    upload(up, c, upd, cuts[1:], ctx, start_status=None)
    n = contributions(run.node, run.agg, ctx)
    check(n == len(run.counted), "%s: nothing counted before submit (%d)" % (ctx, len(run.counted)),
          str(n))
    j = submit_counted(up, c, upd, ctx, len(run.counted) + 1)
    run.counted.append(upd)
    g = expect_ok(up.get(c), ctx + " GET after submit", 200, "COUNTED", upd.total, upd.total)
    check(g is not None and g.get("ack") == j.get("ack"), "%s: GET answers the ack" % ctx,
          json.dumps(g)[:300])
    check(contributions(run.node, run.agg, ctx) == len(run.counted),
          "%s: GET /v1/aggregations counts it" % ctx)


def s_multi_odd(run):
    """Odd-sized chunks cut around every section boundary; the header names its ids and
    dtypes (equal to the query's and the spec's)."""
    ctx, up, c = "odd chunks", run.up, "c-odd"
    upd = multi_update(run.rng)
    upd.header = {"aggregationId": run.agg, "clientId": c,
                  "fields": [{"dtype": "DTYPE_FLOAT32"},
                             {"nnz": str(MULTI_NNZ), "dtype": "DTYPE_FLOAT32"},
                             {"dtype": "DTYPE_FLOAT64"}]}
    cuts = cuts_odd(upd, run.rng)
    check(any(b - a == 1 for a, b in cuts) and any((b - a) % 2 for a, b in cuts if b - a > 1),
          "%s: the plan has 1-byte and other odd chunks" % ctx, str(cuts[:8]))
    full_upload(up, c, upd, ctx, cuts, len(run.counted) + 1)
    run.counted.append(upd)


def s_multi_whole(run):
    ctx, up, c = "one PATCH", run.up, "c-whole"
    upd = multi_update(run.rng)
    full_upload(up, c, upd, ctx, [(0, upd.total)], len(run.counted) + 1)
    run.counted.append(upd)


def s_multi_triple(run):
    """Every chunk sent three times, submit three times, POST after COUNTED: counted once,
    the same ack every time."""
    ctx, up, c = "everything thrice", run.up, "c-triple"
    upd = multi_update(run.rng)
    r = start_retrying(up, c, upd.header)
    expect_ok(r, ctx, 201, "OPEN", 0, upd.total)
    for a, b in cuts_every(upd.total, MIB):
        for _ in range(3):
            r = up.patch_upd(c, upd, a, b)
            require(expect_ok(r, ctx, 200, "OPEN", b) is not None, "%s: [%d, %d) x3" % (ctx, a, b))
    answers = [up.submit(c, upd.crc) for _ in range(3)]
    j = expect_ok(answers[0], ctx + " submit", 200, "COUNTED")
    for r in answers[1:]:
        expect_ok(r, ctx + " submit again", 200, "COUNTED")
        check(r.json == answers[0].json, "%s: a repeated submit answers the first answer" % ctx,
              "%s vs %s" % (answers[0].brief(), r.brief()))
    ack = (j or {}).get("ack", {})
    check(i64(ack, "contributions", ctx) == len(run.counted) + 1,
          "%s: ack.contributions is %d" % (ctx, len(run.counted) + 1), answers[0].brief())
    run.counted.append(upd)
    r = up.start(c, upd.header)
    jj = expect_ok(r, ctx + " POST after COUNTED", 200, "COUNTED")
    check(jj is not None and jj.get("ack") == ack, "%s: POST after COUNTED answers the first ack"
          % ctx, r.brief())
    check(contributions(run.node, run.agg, ctx) == len(run.counted),
          "%s: counted once (%d contributions)" % (ctx, len(run.counted)))


def s_multi_rules(run):
    """The write rules one by one; the same client over gRPC while open (ABORTED) and after
    COUNTED (ALREADY_EXISTS)."""
    ctx, up, c, node = "write rules", run.up, "c-rules", run.node
    upd = multi_update(run.rng)
    data, total = upd.data, upd.total
    upload(up, c, upd, [(0, 100_000)], ctx)
    c1 = 100_000

    def committed_is(n, why):
        expect_ok(up.get(c), "%s (%s)" % (ctx, why), 200, "OPEN", n, total)

    # A repeat of a write, and a part of one: no-ops answering OPEN with the committed size.
    expect_ok(up.patch_upd(c, upd, 0, c1), ctx + " repeat", 200, "OPEN", c1)
    expect_ok(up.patch_upd(c, upd, 50_000, c1), ctx + " repeat of a part", 200, "OPEN", c1)
    expect_ok(up.patch(c, c1, b"", crc=0), ctx + " empty write at the end", 200, "OPEN", c1)
    # Bytes that differ from the committed ones.
    bad = bytearray(data[:c1])
    bad[77_777] ^= 0xFF
    expect_error(up.patch(c, 0, bytes(bad)), ctx + " overlap differs", "FAILED_PRECONDITION",
                 committed=c1)
    bad = bytearray(data[50_000:c1 + 1000])
    bad[10] ^= 0x01
    expect_error(up.patch(c, 50_000, bytes(bad)), ctx + " overlap differs, then new bytes",
                 "FAILED_PRECONDITION", committed=c1)
    committed_is(c1, "nothing appended after a differing overlap")
    # A gap.
    expect_error(up.patch_upd(c, upd, c1 + 1, c1 + 100), ctx + " gap", "ABORTED", committed=c1)
    expect_error(up.patch(c, total + 10, b"x"), ctx + " gap beyond the end", "ABORTED",
                 committed=c1)
    committed_is(c1, "after gaps")
    # Beyond totalSize.
    expect_error(up.patch(c, c1, data[c1:] + b"\0"), ctx + " beyond totalSize", "OUT_OF_RANGE",
                 committed=c1)
    committed_is(c1, "after OUT_OF_RANGE")
    # A checksum that does not match.
    good_crc = upd.chunk_crc(c1, c1 + 5000)
    expect_error(up.patch(c, c1, data[c1:c1 + 5000], crc=good_crc ^ 1), ctx + " bad checksum",
                 "DATA_LOSS", committed=c1)
    committed_is(c1, "after DATA_LOSS")
    # Missing headers (and, our reading of "decimal", values that are not decimal numbers).
    for omit in (("offset",), ("crc",), ("offset", "crc")):
        expect_error(up.patch(c, c1, data[c1:c1 + 10], omit=omit),
                     ctx + " without %s" % "/".join(omit), "INVALID_ARGUMENT", committed=c1)
    for name, value in (("Upload-Crc32c", "0x%x" % upd.chunk_crc(c1, c1 + 10)),
                        ("Upload-Offset", "-1"), ("Upload-Offset", "1e5")):
        h = {"Upload-Offset": str(c1), "Upload-Crc32c": str(upd.chunk_crc(c1, c1 + 10))}
        h[name] = value
        r = node.request("PATCH", "/v1/uploads", up.q(c), body=data[c1:c1 + 10], headers=h)
        expect_error(r, ctx + " %s: %s" % (name, value), "INVALID_ARGUMENT", committed=c1)
    committed_is(c1, "after INVALID_ARGUMENT")
    # A body over 16 MiB: 413 before it is read.
    r, before = raw_oversize_patch(node, up.q(c), c1, MAX_CHUNK + 1)
    expect_error(r, ctx + " body over 16 MiB", "RESOURCE_EXHAUSTED", status=413, committed=c1)
    check(before, "%s: the 413 comes before the body is sent (within 3 s of the headers)" % ctx)
    committed_is(c1, "after 413")
    # Submit before the bytes are complete: the upload stays as it is.
    expect_error(up.submit(c, upd.crc), ctx + " submit before complete", "FAILED_PRECONDITION",
                 committed=c1)
    committed_is(c1, "after an early submit")
    # The same client over gRPC while the upload is open: ABORTED.
    p = grpc_submit_multi(node, run.agg, c, upd)
    code, msg = cli_error(p)
    check(p.returncode == 1 and code == "ABORTED",
          "%s: fedagg-client submit of %s while its HTTP upload is open is refused ABORTED"
          % (ctx, c), "exit %d: %s" % (p.returncode, p.stderr.strip()))
    check(msg == "another update from client '%s' to aggregation '%s' is in flight; wait for its "
          "ack" % (c, run.agg), "%s: the gRPC refusal's message" % ctx, msg)
    # An overlap whose lower part matches appends the rest.
    expect_ok(up.patch_upd(c, upd, 90_000, 1_200_000), ctx + " overlap, then new bytes", 200,
              "OPEN", 1_200_000)
    rest = [(a + 1_200_000, b + 1_200_000) for a, b in cuts_every(total - 1_200_000, MIB)]
    upload(up, c, upd, rest, ctx, start_status=None)
    submit_counted(up, c, upd, ctx, len(run.counted) + 1)
    run.counted.append(upd)
    # After COUNTED, the same client over gRPC: ALREADY_EXISTS.
    p = grpc_submit_multi(node, run.agg, c, upd)
    code, msg = cli_error(p)
    if node.role == "intermediate" and code == "ABORTED":
        # As over gRPC alone: the intermediate learns it from the claim at the root.
        check(not_delivered(c, run.agg).fullmatch(msg) is not None,
              "%s: fedagg-client submit of %s after COUNTED at the intermediate: ABORTED by the "
              "claim until delivered" % (ctx, c), msg)
    else:
        check(p.returncode == 1 and code == "ALREADY_EXISTS" and msg == already_message(c, run.agg),
              "%s: fedagg-client submit of %s after COUNTED is refused ALREADY_EXISTS" % (ctx, c),
              "exit %d: %s" % (p.returncode, p.stderr.strip()))
    if node.role == "intermediate":
        # The claim holds in the whole tree: at the root, over gRPC and HTTP, ABORTED while
        # the intermediate has not delivered it, ALREADY_EXISTS after.
        root = run.root
        deadline = time.time() + 20
        while True:
            p = grpc_submit_multi(root, run.agg, c, upd)
            code, _ = cli_error(p)
            if code != "ABORTED" or time.time() > deadline:
                break
            time.sleep(0.3)
        check(code == "ALREADY_EXISTS", "%s: at the root, %s over gRPC is refused "
              "ALREADY_EXISTS once delivered" % (ctx, c), p.stderr.strip())
        r = Uploads(root, run.agg).start(c, upd.header)
        expect_error(r, ctx + " HTTP start at the root", "ALREADY_EXISTS",
                     message=already_message(c, run.agg))


def s_multi_bad_crc(run):
    """A wrong whole-update checksum: DATA_LOSS, FAILED, the same refusal again, a POST
    starts over."""
    ctx, up, c = "bad update checksum", run.up, "c-crc"
    upd = multi_update(run.rng)
    upload(up, c, upd, cuts_every(upd.total, MIB), ctx)
    wrong = upd.crc ^ 0x5A5A5A5A
    message = ("update checksum mismatch: sent CRC-32C %d, computed %d over the received bytes; "
               "the update was corrupted in transit, send it again" % (wrong, upd.crc))
    r1 = up.submit(c, wrong)
    expect_error(r1, ctx, "DATA_LOSS", message=message, committed=0)
    j = expect_ok(up.get(c), ctx + " GET", 200, "FAILED", 0)
    check(j is not None and "DATA_LOSS" in json.dumps(j.get("error")),
          "%s: the FAILED upload's error says DATA_LOSS" % ctx, json.dumps(j)[:300])
    for crc, why in ((wrong, "the same checksum"), (upd.crc, "the right checksum")):
        r = up.submit(c, crc)
        expect_error(r, "%s: submit again with %s" % (ctx, why), "DATA_LOSS", message=message,
                     committed=0)
        check(r.json == r1.json, "%s: a repeated submit (%s) answers the first answer" % (ctx, why),
              "%s vs %s" % (r1.brief(), r.brief()))
    check(contributions(run.node, run.agg, ctx) == len(run.counted), "%s: nothing counted" % ctx)
    r = up.start(c, upd.header)
    check(r.status in (200, 201), "%s: a POST starts a FAILED upload over (200 or 201)" % ctx,
          r.brief())
    expect_ok(r, ctx + " POST after FAILED", r.status, "OPEN", 0, upd.total)
    upload(up, c, upd, cuts_odd(upd, run.rng), ctx, start_status=None)
    submit_counted(up, c, upd, ctx, len(run.counted) + 1)
    run.counted.append(upd)


def s_multi_delete(run):
    ctx, up, c = "DELETE", run.up, "c-delete"
    upd = multi_update(run.rng)
    upload(up, c, upd, [(0, 300_000)], ctx)
    expect_ok(up.delete(c), ctx, 200, "ABORTED")
    # The section does not say what answers requests after a DELETE. The server keeps the
    # ABORTED upload's answer, as it keeps a COUNTED or FAILED one (and forgets it after
    # --upload_idle_timeout: s_expiry); pinned here.
    expect_ok(up.get(c), ctx + " GET after DELETE", 200, "ABORTED")
    expect_ok(up.delete(c), ctx + " DELETE again", 200, "ABORTED")
    expect_error(up.patch_upd(c, upd, 300_000, 400_000), ctx + " PATCH after DELETE",
                 "FAILED_PRECONDITION", committed=0)
    expect_error(up.submit(c, upd.crc), ctx + " submit after DELETE", "FAILED_PRECONDITION",
                 committed=0)
    check(contributions(run.node, run.agg, ctx) == len(run.counted), "%s: nothing counted" % ctx)
    # The client id is free: a new upload of the same client.
    full_upload(up, c, upd, ctx, [(0, upd.total)], len(run.counted) + 1)
    run.counted.append(upd)


def s_multi_conflict(run):
    """A header that differs from the open upload's: ALREADY_EXISTS; the same header
    resumes it."""
    ctx, up, c = "header conflict", run.up, "c-conflict"
    upd = multi_update(run.rng)
    upload(up, c, upd, [(0, 200_000)], ctx)
    other = {"fields": [{}, {"nnz": str(MULTI_NNZ + 1)}, {}]}
    expect_error(up.start(c, other), ctx, "ALREADY_EXISTS", committed=200_000)
    expect_ok(up.get(c), ctx + " GET", 200, "OPEN", 200_000, upd.total)
    expect_ok(up.start(c, upd.header), ctx + " same header", 200, "OPEN", 200_000, upd.total)
    upload(up, c, upd, [(200_000, upd.total)], ctx, start_status=None)
    submit_counted(up, c, upd, ctx, len(run.counted) + 1)
    run.counted.append(upd)


def s_multi_grpc_first(run):
    """A client counted over gRPC: its HTTP start is refused ALREADY_EXISTS (one client)."""
    ctx, up, c = "gRPC first", run.up, "g-1"
    upd = multi_update(run.rng)
    p = grpc_submit_multi(run.node, run.agg, c, upd)
    require(p.returncode == 0, "%s: fedagg-client submit %s" % (ctx, c), p.stderr)
    run.counted.append(upd)
    expect_refused_as_counted(run.node, up, c, upd, ctx)


def s_multi_results(run):
    ctx, root, node, agg = "results", run.root, run.node, run.agg
    n = len(run.counted)
    check(contributions(node, agg, ctx) == n, "%s: %d contributions at %s" % (ctx, n, node.name))
    p = node.cli("--json", "status", agg)
    check(p.returncode == 0 and str(json.loads(p.stdout or "{}").get("contributions")) == str(n),
          "%s: fedagg-client status agrees (%d)" % (ctx, n), p.stdout + p.stderr)
    # Before the seal: refused as GetResult refuses it.
    r = root.request("GET", "/v1/results", {"aggregation_id": agg})
    p = root.cli("result", agg, "--out=" + tempfile.mkdtemp(dir=root.tmp))
    code, msg = cli_error(p)
    check(code == "FAILED_PRECONDITION", "%s: fedagg-client result before the seal: "
          "FAILED_PRECONDITION" % ctx, p.stderr)
    expect_error(r, ctx + " before the seal", "FAILED_PRECONDITION", message=msg)
    seal(root, agg)
    st = wait_state(root, agg, ("FINALIZED", "FAILED"), ctx)
    require(st is not None and st.get("state") == "FINALIZED", "%s: %s FINALIZED" % (ctx, agg),
            json.dumps(st)[:300])
    exp = expected_multi(run.counted)
    r = root.request("GET", "/v1/results", {"aggregation_id": agg})
    j = expect_ok(r, ctx, 200)
    require(j is not None, "GET /v1/results answers")
    status = j.get("status", {})
    check(status.get("state") == "FINALIZED" and i64(status, "contributions", ctx) == n,
          "%s: status FINALIZED with %d contributions" % (ctx, n), json.dumps(status)[:300])
    fields = j.get("fields", [])
    nnz = len(exp["s_indices"])
    want = [("w", "FEDERATED_SUM", "DTYPE_FLOAT32", [str(MULTI_N1)], 0, False),
            ("s", "SPARSE_SUM_SPARSE", "DTYPE_FLOAT32", [str(nnz)], nnz, True),
            ("d", "FEDERATED_MEAN", "DTYPE_FLOAT64", [str(MULTI_N3)], 0, False)]
    check(len(fields) == 3, "%s: three FieldHeaders" % ctx, json.dumps(fields)[:300])
    for f, (path, intrinsic, dtype, shape, nz, counts) in zip(fields, want):
        got = (f.get("path"), f.get("intrinsic"), f.get("value", {}).get("dtype"),
               f.get("value", {}).get("shape"), i64(f, "nnz", ctx), bool(f.get("hasCounts")))
        check(got == (path, intrinsic, dtype, shape, nz, counts),
              "%s: FieldHeader %s" % (ctx, (path, intrinsic, dtype, shape, nz, counts)), str(got))
        data = f.get("value", {}).get("data", "")
        check(data == "", "%s: FieldHeader %s has no data" % (ctx, path), str(data)[:80])
    # Raw parts, against NumPy and against fedagg-client's result.
    out = tempfile.mkdtemp(dir=root.tmp)
    p = root.cli("result", agg, "--out=" + out)
    check(p.returncode == 0, "%s: fedagg-client result" % ctx, p.stderr)
    parts = [(0, "VALUES", "<f4", exp["w"], "w.npy", True),
             (1, "INDICES", "<i8", exp["s_indices"], "s.indices.npy", True),
             (1, "VALUES", "<f4", exp["s_values"], "s.npy", True),
             (1, "COUNTS", "<i8", exp["s_counts"], "s.counts.npy", True),
             (2, "VALUES", "<f8", exp["d"], "d.npy", False)]
    for field, part, dtype, expected, npy, exact in parts:
        r = root.request("GET", "/v1/results", {"aggregation_id": agg, "field": field,
                                                "part": part})
        what = "%s: field %d %s" % (ctx, field, part)
        size = expected.size * np.dtype(dtype).itemsize
        if not check(r.status == 200 and len(r.body) == size,
                     "%s: HTTP 200 with %d bytes" % (what, size),
                     "HTTP %d, %d bytes" % (r.status, len(r.body))):
            continue
        got = np.frombuffer(r.body, dtype=dtype)
        if exact:
            check(np.array_equal(got, expected), "%s equals NumPy exactly" % what,
                  "first differences at %s" % np.nonzero(got != expected)[0][:5])
        else:
            check(np.allclose(got, expected, rtol=1e-12, atol=1e-12),
                  "%s equals NumPy within 1e-12" % what,
                  "max abs difference %g" % np.max(np.abs(got - expected)))
        try:
            mine = np.load(os.path.join(out, npy))
            check(mine.astype(dtype).tobytes() == r.body,
                  "%s equals fedagg-client's %s to the bit" % (what, npy))
        except OSError as e:
            check(False, "%s: fedagg-client wrote %s" % (what, npy), str(e))
    if node.role == "intermediate":
        # The intermediate's mirror: answered as its GetResult answers.
        r = node.request("GET", "/v1/results", {"aggregation_id": agg})
        p = node.cli("result", agg, "--out=" + tempfile.mkdtemp(dir=node.tmp))
        code, msg = cli_error(p)
        if p.returncode == 0:
            check(r.status == 200, "%s: the intermediate serves the result as GetResult does"
                  % ctx, r.brief())
        else:
            expect_error(r, ctx + " at the intermediate (as its GetResult)", code or "UNKNOWN",
                         message=msg)


def s_closed(node):
    """The aggregation leaves OPEN while an upload is open: its submit is refused
    FAILED_PRECONDITION (FAILED upload), and a new start too."""
    root, ctx = node.root, "aggregation closed"
    agg = "%s-closed" % node.name
    create(root, agg, "<x=float32[4]>", "federated_sum")
    wait_mirrored(node, agg, ctx)
    up = Uploads(node, agg)
    upd = small_update([1, 2, 3, 4])
    upload(up, "k-1", upd, [(0, upd.total)], ctx)
    seal(root, agg)
    wait_state(node, agg, ("SEALED", "FINALIZED", "FAILED"), ctx)
    r = up.submit("k-1", upd.crc)
    expect_error(r, ctx + " submit", "FAILED_PRECONDITION", committed=0)
    msg = (r.json or {}).get("message", "") if isinstance(r.json, dict) else ""
    check(("aggregation '%s'" % agg) in msg, "%s: the refusal names the aggregation" % ctx, msg)
    j = expect_ok(up.get("k-1"), ctx + " GET", 200, "FAILED", 0)
    check(j is not None and "FAILED_PRECONDITION" in json.dumps(j.get("error")),
          "%s: the FAILED upload's error says FAILED_PRECONDITION" % ctx, json.dumps(j)[:300])
    expect_error(up.start("k-2", upd.header), ctx + " new start", "FAILED_PRECONDITION")


def s_max_contributions(node):
    """An open upload counts towards max_contributions."""
    root, ctx = node.root, "max_contributions"
    agg = "%s-maxc" % node.name
    create(root, agg, "<x=float32[4]>", "federated_sum", "--max_contributions=1")
    wait_mirrored(node, agg, ctx)
    up = Uploads(node, agg)
    upd = small_update([1, 2, 3, 4])
    r = start_retrying(up, "m-1", upd.header)
    expect_ok(r, ctx, 201, "OPEN", 0)
    full = ("aggregation '%s' has all 1 contributions it accepts (counted, in flight, or "
            "acknowledged by child aggregators)" % agg)
    expect_error(up.start("m-2", upd.header), ctx + " second client", "RESOURCE_EXHAUSTED",
                 message=full)
    p = grpc_submit_small(node, agg, "m-3", [1, 1, 1, 1])
    code, msg = cli_error(p)
    check(code == "RESOURCE_EXHAUSTED" and msg == full,
          "%s: fedagg-client submit of another client is refused the same way" % ctx, p.stderr)
    expect_ok(up.delete("m-1"), ctx, 200, "ABORTED")
    full_upload(up, "m-2", upd, ctx, [(0, upd.total)], 1)
    if node.role == "root":
        st = wait_state(root, agg, ("FINALIZED",), ctx)
        check(st is not None and i64(st, "contributions", ctx) == 1,
              "%s: reaching max_contributions finalizes with 1 contribution" % ctx, json.dumps(st))
    else:
        # Through an intermediate the root does not finalize (its mirror seals at 1 and the
        # root stays OPEN with 0, as with fedagg-client submit alone): not an HTTP matter.
        check(contributions(node, agg, ctx) == 1, "%s: 1 contribution at the intermediate" % ctx)
        root.cli("cancel", agg)


def s_big(node):
    """A body of exactly 16 MiB is taken."""
    root, ctx = node.root, "16 MiB body"
    agg = "%s-big" % node.name
    n = MAX_CHUNK // 4 + 1
    create(root, agg, "<x=float32[%d]>" % n, "federated_sum")
    wait_mirrored(node, agg, ctx)
    up = Uploads(node, agg)
    x = np.random.default_rng(7).integers(-1000, 1001, n).astype("<f4")
    upd = Update([x.tobytes()], {"fields": [{}]})
    upload(up, "b-1", upd, [(0, MAX_CHUNK), (MAX_CHUNK, upd.total)], ctx)
    submit_counted(up, "b-1", upd, ctx, 1)
    seal(root, agg)
    wait_state(root, agg, ("FINALIZED",), ctx)
    r = root.request("GET", "/v1/results", {"aggregation_id": agg, "field": 0, "part": "VALUES"})
    check(r.status == 200 and r.body == x.tobytes(), "%s: the result is the update" % ctx,
          "HTTP %d, %d bytes" % (r.status, len(r.body)))


def s_paths(node):
    ctx = "paths"
    for path in ("/v1/nope", "/nope", "/", "/v1/uploads/extra"):
        r = node.request("GET", path)
        expect_error(r, ctx + " unknown path", "NOT_FOUND")
    for method, path in (("PUT", "/v1/uploads"), ("POST", "/v1/tasks"),
                         ("DELETE", "/v1/aggregations"), ("GET", "/v1/uploads:submit"),
                         ("PATCH", "/v1/results"), ("POST", "/fedagg.mjs"),
                         ("DELETE", "/v1/tasks")):
        r = node.request(method, path, {"aggregation_id": "x", "client_id": "y"})
        check(r.status == 405, "%s: %s %s answers 405" % (ctx, method, path), r.brief())
    r = node.request("GET", "/fedagg.mjs")
    check(r.status == 200, "%s: GET /fedagg.mjs answers 200" % ctx, r.brief())
    check("javascript" in r.headers.get("content-type", ""),
          "%s: /fedagg.mjs has a JavaScript Content-Type" % ctx, r.headers.get("content-type", ""))
    src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "client_stub",
                       "js", "fedagg.mjs")
    if os.path.exists(src):
        with open(src, "rb") as f:
            check(r.body == f.read(), "%s: /fedagg.mjs is client_stub/js/fedagg.mjs" % ctx,
                  "%d bytes served" % len(r.body))
    else:
        check(b"export" in r.body, "%s: /fedagg.mjs exports something" % ctx)
    r = node.request("GET", "/examples/logistic-regression/")
    check(r.status == 200 and "text/html" in r.headers.get("content-type", ""),
          "%s: GET /examples/logistic-regression/ answers an HTML page" % ctx,
          "%s, %s" % (r.brief()[:100], r.headers.get("content-type")))
    if node.shared_metrics:
        r = node.request("GET", "/metrics")
        check(r.status == 200 and b"fedagg_" in r.body,
              "%s: the shared listener still serves /metrics" % ctx, r.brief()[:200])
        r = node.request("GET", "/healthz")
        check(r.status == 200, "%s: the shared listener still serves /healthz" % ctx, r.brief())


def suite_main(node, seed):
    run = MultiRun(node, seed)
    yield "tasks", s_tasks, (node,)
    yield "start refusals and validation", s_start_refusals, (node,)
    yield "multi setup", s_multi_setup, (run,)
    yield "1 MiB chunks", s_multi_mib, (run,)
    yield "odd chunks", s_multi_odd, (run,)
    yield "one PATCH", s_multi_whole, (run,)
    yield "everything thrice", s_multi_triple, (run,)
    yield "write rules", s_multi_rules, (run,)
    yield "bad update checksum", s_multi_bad_crc, (run,)
    yield "DELETE", s_multi_delete, (run,)
    yield "header conflict", s_multi_conflict, (run,)
    yield "gRPC first", s_multi_grpc_first, (run,)
    yield "results", s_multi_results, (run,)
    yield "aggregation closed", s_closed, (node,)
    yield "max_contributions", s_max_contributions, (node,)
    yield "16 MiB body", s_big, (node,)
    yield "paths", s_paths, (node,)


# ---------------------------------------------------------------------------------------
# Scenarios on the aux nodes (tokens, 2 s idle timeout, 4 streams per identity).


def s_waiting(node):
    """An upload larger than the 1 MiB ingest window is OPEN alone; a second one waits:
    WAITING (202) after about 10 s; when the first expires, its window place is freed and
    the second gets OPEN."""
    root, ctx = node.root, "WAITING"
    agg = "%s-window" % node.name
    n = 2 * MIB // 4 + 1
    create(root, agg, "<x=float32[%d]>" % n, "federated_sum")
    up = Uploads(node, agg)
    x = np.ones(n, dtype="<f4")
    upd = Update([x.tobytes()], {"fields": [{}]})
    r = start_retrying(up, "w-1", upd.header)
    require(expect_ok(r, ctx + " first", 201, "OPEN", 0, upd.total) is not None,
            "the first upload is OPEN")
    stop = threading.Event()
    kept = []

    def keep_alive():
        while not stop.is_set():
            kept.append(up.get("w-1").status)
            stop.wait(0.5)

    t = threading.Thread(target=keep_alive)
    t.start()
    try:
        t0 = time.time()
        r = up.start("w-2", upd.header)
        waited = time.time() - t0
    finally:
        stop.set()
        t.join()
    check(all(s == 200 for s in kept), "%s: the first upload stayed OPEN while kept alive" % ctx,
          str(kept))
    expect_ok(r, ctx + " second", 202, "WAITING")
    check(5 <= waited <= 20, "%s: WAITING comes after about 10 s" % ctx, "%.1f s" % waited)
    # w-1 now gets no request: it expires after 2 s and frees the window.
    deadline = time.time() + 15
    while True:
        r = up.start("w-2", upd.header)
        if r.status != 202 or time.time() > deadline:
            break
        time.sleep(0.1)
    check(r.status in (200, 201), "%s: the second upload gets OPEN once the first expired "
          "(200 or 201)" % ctx, r.brief())
    expect_ok(r, ctx + " second", r.status, "OPEN", 0, upd.total)
    expect_error(up.get("w-1"), ctx + " the first, expired", "NOT_FOUND")
    upload(up, "w-2", upd, [(0, MIB), (MIB, upd.total)], ctx, start_status=None)
    submit_counted(up, "w-2", upd, ctx, 1)
    root.cli("cancel", agg)


def s_auth(node):
    root, ctx = node.root, "bearer tokens"
    agg = "%s-auth" % node.name
    create(root, agg, "<x=float32[8]>", "federated_sum")
    up = Uploads(node, agg)
    upd = small_update(range(8))
    r = start_retrying(up, "a-1", upd.header)
    expect_ok(r, ctx, 201, "OPEN", 0)
    q = up.q("a-1")
    requests = [("GET", "/v1/tasks", {"client_id": "a-1"}, None, None),
                ("POST", "/v1/uploads", q, upd.header, None),
                ("GET", "/v1/uploads", q, None, None),
                ("PATCH", "/v1/uploads", q, upd.data[:8],
                 {"Upload-Offset": "0", "Upload-Crc32c": str(crc32c(upd.data[:8]))}),
                ("POST", "/v1/uploads:submit", q, {"crc32c": upd.crc}, None),
                ("DELETE", "/v1/uploads", q, None, None),
                ("GET", "/v1/aggregations", {"aggregation_id": agg}, None, None),
                ("GET", "/v1/results", {"aggregation_id": agg}, None, None)]
    for token, auth, message in ((None, None, UNAUTH_MISSING),
                                 ("wrong-token", None, UNAUTH_WRONG),
                                 (None, "Basic " + node.token, UNAUTH_WRONG),
                                 (None, "Bearer", UNAUTH_WRONG)):
        for method, path, query, body, headers in requests:
            h = dict(headers or {})
            if auth:
                h["Authorization"] = auth
            r = node.request(method, path, query, body=body, headers=h, token=token)
            expect_error(r, "%s (%s)" % (ctx, auth or token or "no Authorization"),
                         "UNAUTHENTICATED", message=message)
    # Nothing of those reached the upload.
    expect_ok(up.get("a-1"), ctx + " after refused requests", 200, "OPEN", 0)
    upload(up, "a-1", upd, [(0, upd.total)], ctx, start_status=None)
    submit_counted(up, "a-1", upd, ctx, 1)
    # The other accepted token works too.
    r = start_retrying(up, "a-2", upd.header, token=node.other_token)
    expect_ok(r, ctx + " second token", 201, "OPEN", 0)
    r = up.patch("a-2", 0, upd.data, token=node.other_token)
    expect_ok(r, ctx + " second token", 200, "OPEN", upd.total)
    r = up.submit("a-2", upd.crc, token=node.other_token)
    expect_ok(r, ctx + " second token", 200, "COUNTED")
    root.cli("cancel", agg)


def s_max_streams(node):
    """An open upload holds one of its caller's --max_streams_per_identity (4) slots."""
    root, ctx = node.root, "max_streams_per_identity"
    agg = "%s-streams" % node.name
    create(root, agg, "<x=float32[8]>", "federated_sum")
    up = Uploads(node, agg)
    upd = small_update(range(8))
    for i in range(1, 5):
        r = start_retrying(up, "s-%d" % i, upd.header)
        expect_ok(r, ctx, 201, "OPEN", 0)
    limit = re.compile(r"bearer token #\d+ already has 4 update streams open, the most this "
                       r"server allows per caller \(--max_streams_per_identity=4\); send more "
                       r"updates over an open Contribute stream, or close one first")
    expect_error(up.start("s-5", upd.header), ctx + " fifth", "RESOURCE_EXHAUSTED", message=limit)
    expect_ok(up.start("s-2", upd.header), ctx + " an open one again", 200, "OPEN", 0)
    p = grpc_submit_small(node, agg, "s-6", range(8))
    code, msg = cli_error(p)
    check(code == "RESOURCE_EXHAUSTED" and limit.fullmatch(msg or "") is not None,
          "%s: a gRPC Submit with the same token is refused the same way" % ctx, p.stderr)
    expect_ok(up.start("s-5", upd.header, token=node.other_token), ctx + " other token", 201,
              "OPEN", 0)
    expect_ok(up.delete("s-1"), ctx, 200, "ABORTED")
    expect_ok(up.start("s-6", upd.header), ctx + " after a DELETE", 201, "OPEN", 0)
    upload(up, "s-2", upd, [(0, upd.total)], ctx, start_status=None)
    submit_counted(up, "s-2", upd, ctx, 1)
    expect_ok(up.start("s-7", upd.header), ctx + " after a submit", 201, "OPEN", 0)
    for c in ("s-3", "s-4", "s-6", "s-7"):
        up.delete(c)
    up.delete("s-5", token=node.other_token)
    root.cli("cancel", agg)


def s_expiry(node):
    """--upload_idle_timeout=2s: open uploads, COUNTED and FAILED answers forgotten."""
    root, ctx = node.root, "expiry"
    agg = "%s-expiry" % node.name
    create(root, agg, "<x=float32[8]>", "federated_sum")
    up = Uploads(node, agg)
    upd = small_update(range(8))
    upload(up, "e-open", upd, [(0, 12)], ctx)
    upload(up, "e-grpc", upd, [(0, 12)], ctx)
    counted = full_upload(up, "e-counted", upd, ctx, [(0, upd.total)], 1)
    expect_ok(up.start("e-counted", upd.header), ctx + " POST after COUNTED", 200, "COUNTED")
    upload(up, "e-failed", upd, [(0, upd.total)], ctx)
    expect_error(up.submit("e-failed", upd.crc ^ 1), ctx, "DATA_LOSS")
    upload(up, "e-alive", upd, [(0, 12)], ctx)
    upload(up, "e-deleted", upd, [(0, 12)], ctx)
    expect_ok(up.delete("e-deleted"), ctx, 200, "ABORTED")
    # 4.5 s without a request to the others; e-alive gets one every 0.5 s.
    t_end = time.time() + 4.5
    while time.time() < t_end:
        expect_ok(up.get("e-alive"), ctx + " kept alive", 200, "OPEN", 12)
        time.sleep(0.5)
    expect_error(up.get("e-open"), ctx + " open upload idle for 4.5 s", "NOT_FOUND")
    expect_error(up.patch_upd("e-open", upd, 12, upd.total), ctx + " PATCH after expiry",
                 "NOT_FOUND")
    expect_error(up.submit("e-open", upd.crc), ctx + " submit after expiry", "NOT_FOUND")
    # The client ids are free: over HTTP and over gRPC.
    full_upload(up, "e-open", upd, ctx, [(0, upd.total)], 2)
    p = grpc_submit_small(node, agg, "e-grpc", range(8))
    check(p.returncode == 0, "%s: fedagg-client submit of an expired upload's client" % ctx,
          p.stderr)
    # The COUNTED answer is forgotten; the aggregation refuses the client ALREADY_EXISTS.
    check(counted is not None, "%s: e-counted was counted" % ctx)
    expect_error(up.get("e-counted"), ctx + " COUNTED upload after expiry", "NOT_FOUND")
    expect_refused_as_counted(node, up, "e-counted", upd, ctx + " POST after the answer expired")
    # The ABORTED answer is forgotten too.
    expect_error(up.get("e-deleted"), ctx + " ABORTED upload after expiry", "NOT_FOUND")
    # The FAILED answer is forgotten; nothing was counted, so the client starts again.
    expect_error(up.get("e-failed"), ctx + " FAILED upload after expiry", "NOT_FOUND")
    full_upload(up, "e-failed", upd, ctx, [(0, upd.total)], 4)
    upload(up, "e-alive", upd, [(12, upd.total)], ctx, start_status=None)
    submit_counted(up, "e-alive", upd, ctx, 5)
    check(contributions(node, agg, ctx) == 5, "%s: 5 contributions" % ctx)
    root.cli("cancel", agg)


def s_size_limit(node):
    """--max_update_mib=4: a header over it is refused INVALID_ARGUMENT."""
    root, ctx = node.root, "update size limit"
    agg = "%s-sizes" % node.name
    create(root, agg, "<s=float32[1000]>", "sparse_sum_sparse")
    up = Uploads(node, agg)
    r = start_retrying(up, "z-1", {"fields": [{"nnz": "1000000"}]})
    expect_error(r, ctx, "INVALID_ARGUMENT", message=re.compile(
        r"field 's': 1000000 entries exceed the update size limit of 4194304 bytes|"
        r"update of at least \d+ bytes exceeds the size limit of 4194304 bytes"))
    root.cli("cancel", agg)


def s_memory_budget(node):
    """--memory_budget_bytes=8388608: an upload of 12 MB is refused RESOURCE_EXHAUSTED."""
    root, ctx = node.root, "memory budget"
    agg = "%s-budget" % node.name
    create(root, agg, "<s=float32[1000]>", "sparse_sum_sparse")
    up = Uploads(node, agg)
    r = start_retrying(up, "y-1", {"fields": [{"nnz": "1000000"}]})
    expect_error(r, ctx, "RESOURCE_EXHAUSTED", message=re.compile(
        r"memory budget reached: an update of \d+ bytes needs .*", re.S))
    r = start_retrying(up, "y-2", {"fields": [{"nnz": "10"}]})
    expect_ok(r, ctx + " a small one", 201, "OPEN", 0, 120)
    up.delete("y-2")
    root.cli("cancel", agg)


def suite_aux(node):
    if node.role == "root":
        yield "WAITING", s_waiting, (node,)
    yield "bearer tokens", s_auth, (node,)
    yield "max_streams_per_identity", s_max_streams, (node,)
    yield "expiry", s_expiry, (node,)
    if node.role == "root":
        yield "update size limit", s_size_limit, (node,)
    else:
        yield "memory budget", s_memory_budget, (node,)


# ---------------------------------------------------------------------------------------


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--only=")]
    only = [a[len("--only="):] for a in sys.argv[1:] if a.startswith("--only=")]
    with open(args[0]) as f:
        cfg = json.load(f)
    tmp = tempfile.mkdtemp(prefix="http-", dir=cfg.get("tmp"))  # .npy files, results
    nodes = {c["name"]: Node(c, cfg["client"], tmp) for c in cfg["nodes"]}
    for n in nodes.values():
        if n.root_name:
            n.root = nodes[n.root_name]
    plan = []
    for i, name in enumerate(("root", "intermediate")):
        plan += [("%s: %s" % (name, s), fn, a) for s, fn, a in suite_main(nodes[name], 100 + i)]
    for name in ("aux-root", "aux-intermediate"):
        plan += [("%s: %s" % (name, s), fn, a) for s, fn, a in suite_aux(nodes[name])]
    try:
        return run_plan(plan, only)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def run_plan(plan, only):
    ran = 0
    for title, fn, fargs in plan:
        if only and not any(o in title for o in only):
            continue
        ran += 1
        CHECKS.scenario = title
        before = len(CHECKS.failures)
        t0 = time.time()
        try:
            fn(*fargs)
        except Failure:
            pass
        except Exception:  # noqa: BLE001 -- reported, and the run goes on
            CHECKS.failures.append("[%s] raised:\n%s" % (title, traceback.format_exc()))
            print("FAIL [%s] raised:\n%s" % (title, traceback.format_exc()), flush=True)
        failed = len(CHECKS.failures) - before
        print("%s %s (%.1f s)" % ("PASS" if not failed else "FAIL(%d)" % failed, title,
                                  time.time() - t0), flush=True)
    print("%d scenarios, %d checks, %d failed" % (ran, CHECKS.count, len(CHECKS.failures)))
    if ran == 0:
        print("no scenario matched --only")
        return 1
    return 1 if CHECKS.failures else 0


if __name__ == "__main__":
    sys.exit(main())
