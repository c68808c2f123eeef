"""fedagg's HTTP path from a real browser (browser_test.sh starts the servers, nginx and the
cutting relay, then runs this with /usr/bin/python3). Headless Chromium through Debian's
chromedriver and python3-selenium; nothing is downloaded (the driver's path is given, so
selenium-manager never runs). Checks, each of which fails with what it saw:

(0) the server serves client_stub/js's files (/fedagg.mjs, the example page) as they are here;
(a) the example page's round with three pages (three client ids) through nginx to an
    intermediate under the root: every page finishes, and the result (as each page got it
    and as the root gives it to fedagg-client) is the weighted mean of the three updates the
    pages report, computed here with NumPy;
(b) a 16 MiB upload cut by the network (cut_relay.py) at 25%, 50% and 75% resumes from the
    size the server committed: the bytes sent are at most the update plus one chunk, and
    the update is counted once;
(c) the start, every chunk and the submit sent three times (the last chunk's three at once)
    count the client once, and the result equals the update;
(d) refusals as the browser sees them, through nginx and at the root directly: a wrong
    offset, a bad checksum, changed bytes, missing headers, an oversized chunk, a submit
    before the bytes are complete, and (at the root, --upload_idle_timeout=2s) an expired upload;
(e) a screenshot of a finished example page shows the result: #result's text, and its
    rectangle in the PNG (decoded here with zlib) mostly the page's green;
(f) the client's own recovery, at the root: a damaged chunk written again, a stale offset
    resynchronised from the ABORTED answer's committed size, an expired upload started
    again from 0; counted once.
FEDAGG_BROWSER_ONLY=a,e (the letters, 0 for the files) runs only those checks.
"""
import argparse
import base64
import json
import os
import socket
import struct
import subprocess
import sys
import time
import traceback
import urllib.request
import zlib

import numpy as np
from selenium import webdriver
from selenium.webdriver.chrome.service import Service

MIB = 1 << 20
MAX_CHUNK = 16 * MIB
GREEN = (0x1E, 0x8E, 0x3E)  # #result.done's background in the example page


class Cli:
    """fedagg-client, for what the browser does not do: create, seal, status, result."""

    def __init__(self, binary, workdir):
        self.binary, self.workdir = binary, workdir

    def __call__(self, server, *args, timeout=60):
        run = subprocess.run([self.binary, f"--server={server}", *args], capture_output=True, text=True,
                             timeout=timeout)
        if run.returncode != 0:
            raise AssertionError(f"fedagg-client {' '.join(args)} at {server} failed ({run.returncode}): "
                                 f"{run.stderr.strip()}")
        return run.stdout

    def status(self, server, aggregation):
        return json.loads(self(server, "--json", "status", aggregation))

    def contributions(self, server, aggregation):
        return int(self.status(server, aggregation).get("contributions", 0))

    def finalize(self, server, aggregation):
        self(server, "seal", aggregation)
        last = self(server, "watch", aggregation, timeout=60).strip().splitlines()[-1]
        check("FINALIZED" in last, f"{aggregation} did not finalize: {last}")

    def result(self, server, aggregation, field):
        out = os.path.join(self.workdir, f"result-{aggregation}")
        self(server, "result", aggregation, f"--out={out}")
        return np.load(os.path.join(out, f"{field}.npy"))


def check(condition, message):
    if not condition:
        raise AssertionError(message)


def equal_arrays(got, expected, what):
    got, expected = np.asarray(got), np.asarray(expected)
    check(got.shape == expected.shape, f"{what}: shape {got.shape}, expected {expected.shape}")
    if not np.array_equal(got, expected):
        bad = np.flatnonzero(got != expected)
        raise AssertionError(f"{what}: {bad.size} of {got.size} elements differ; first at {bad[0]}: "
                             f"{got.flat[bad[0]]} != {expected.flat[bad[0]]}")


# --- the browser -----------------------------------------------------------------------------

def start_browser():
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--window-size=1000,800", "--force-device-scale-factor=1", "--no-first-run",
                 "--disable-background-networking", "--disable-background-timer-throttling",
                 "--disable-renderer-backgrounding", "--disable-backgrounding-occluded-windows"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path="/usr/bin/chromedriver"), options=options)
    driver.set_script_timeout(180)
    return driver


# Helpers every script below starts with: the module, `call` (one fetch, answering
# {status, json} or {status, text}), `q` (the query of an upload), `h` (a write's headers),
# `b64` (bytes as base64, to bring arrays back to Python).
PRELUDE = r"""
const m = await import(window.__fedaggModule ?? '/fedagg.mjs');
const call = async (method, path, {body, headers = {}} = {}) => {
  const init = {method, headers: {...headers}, cache: 'no-store'};
  if (body instanceof Uint8Array) {
    init.body = body;
    init.headers['Content-Type'] = 'application/octet-stream';
  } else if (body !== undefined) {
    init.body = JSON.stringify(body);
    init.headers['Content-Type'] = 'application/json';
  }
  let r;
  try {
    r = await fetch(path, init);
  } catch (e) {
    return {status: 0, networkError: String(e)};
  }
  const text = await r.text();
  try {
    return {status: r.status, json: JSON.parse(text)};
  } catch {
    return {status: r.status, text: text.slice(0, 300)};
  }
};
const q = (a, c) => `?aggregation_id=${encodeURIComponent(a)}&client_id=${encodeURIComponent(c)}`;
const h = (offset, piece) => ({'Upload-Offset': String(offset), 'Upload-Crc32c': String(m.crc32c(piece))});
const b64 = (u8) => {
  let s = '';
  for (let i = 0; i < u8.length; i += 32768) s += String.fromCharCode.apply(null, u8.subarray(i, i + 32768));
  return btoa(s);
};
"""


def run_js(driver, body, *args):
    """Runs `body` (an async function's body, after PRELUDE; its arguments in `args`) in the
    current page and answers what it returns."""
    script = ("const done = arguments[arguments.length - 1];\n"
              "const args = Array.prototype.slice.call(arguments, 0, -1);\n"
              "(async () => {\n" + PRELUDE + body + "\n})().then(done, (e) => done({__error: String(e && e.stack || e)}));")
    answer = driver.execute_async_script(script, *args)
    if isinstance(answer, dict) and "__error" in answer:
        raise AssertionError(f"the page's script failed: {answer['__error']}")
    return answer


def open_module_page(ctx, base):
    """A page of `base`'s origin with nothing running in it: the client module itself. With
    FEDAGG_BROWSER_ASSETS=source, the scripts import this tree's client_stub/js/fedagg.mjs
    (as a blob: URL) instead of the server's embedded copy."""
    ctx.driver.get(f"{base}/fedagg.mjs")
    if os.environ.get("FEDAGG_BROWSER_ASSETS") == "source":
        with open(os.path.join(ctx.js, "fedagg.mjs"), encoding="utf-8") as f:
            source = f.read()
        ctx.driver.execute_script("window.__fedaggModule = URL.createObjectURL("
                                  "new Blob([arguments[0]], {type: 'text/javascript'}));", source)


def answer_of(answer, what):
    """{status, code, committed, state, json} of one call's answer, for the checks."""
    body = answer.get("json") or {}
    return {"status": answer.get("status"), "code": body.get("code"), "state": body.get("state"),
            "committed": int(body["committedSize"]) if "committedSize" in body else None, "json": body,
            "what": what, "raw": answer}


def expect(answer, what, status, code=None, state=None, committed=None):
    a = answer_of(answer, what)
    problems = []
    if a["status"] != status:
        problems.append(f"HTTP {a['status']} (expected {status})")
    if code is not None and a["code"] != code:
        problems.append(f"code {a['code']} (expected {code})")
    if state is not None and a["state"] != state:
        problems.append(f"state {a['state']} (expected {state})")
    if committed is not None and (a["committed"] or 0) != committed:
        problems.append(f"committedSize {a['committed']} (expected {committed})")
    check(not problems, f"{what}: {', '.join(problems)}; the answer: {json.dumps(a['raw'])[:600]}")
    print(f"    {what}: HTTP {a['status']} {a['code'] or a['state']}"
          + (f" committedSize={a['committed']}" if a["committed"] is not None else ""))
    return a


# --- (0) files ---------------------------------------------------------------------------------

def test_served_files(ctx):
    if os.environ.get("FEDAGG_BROWSER_ASSETS") == "source":
        print("    (FEDAGG_BROWSER_ASSETS=source: nginx serves client_stub/js itself; not checked)")
        return
    for url, path in (("/fedagg.mjs", "fedagg.mjs"),
                      ("/examples/logistic-regression/", "examples/logistic-regression/index.html"),
                      ("/examples/logistic-regression/app.mjs", "examples/logistic-regression/app.mjs")):
        with urllib.request.urlopen(ctx.lb + url) as response:
            served, ctype = response.read(), response.headers.get("Content-Type", "")
        with open(os.path.join(ctx.js, path), "rb") as f:
            here = f.read()
        check(served == here, f"{url} as served ({len(served)} bytes) differs from client_stub/js/{path} "
                              f"({len(here)} bytes): is fedagg-server built from this tree?")
        wanted = "text/html" if path.endswith(".html") else "javascript"
        check(wanted in ctype, f"{url} is served as '{ctype}', expected {wanted}")
        print(f"    {url}: {len(served)} bytes, {ctype}, as in the tree")


# --- (a) + (e) the example page's round ---------------------------------------------------------

PAGE_STATE = """
const e = window.fedaggExample;
return e && {state: e.state, error: e.error, clientId: e.clientId, aggregationId: e.aggregationId,
             update: e.update && Array.from(e.update), weight: e.weight, ack: e.ack, accuracy: e.accuracy,
             result: e.result, progress: e.progress, shown: document.getElementById('result').textContent,
             shownClass: document.getElementById('result').className};
"""


def test_example_round(ctx):
    driver, aggregation = ctx.driver, "lr-round"
    # No max_contributions: the creator seals the round once the three pages contributed (an
    # intermediate that counts max_contributions itself seals its mirror, and the root then
    # waits for a seal or a deadline).
    ctx.cli(ctx.root, "create", aggregation, "--type=<weights=float32[9]>", "--intrinsics=federated_weighted_mean",
            "--min_contributions=3")
    clients = ["page-ada", "page-grace", "page-alan"]  # slices of 565, 424 and 548 examples
    handles = []
    for i, client in enumerate(clients):
        if i:
            driver.switch_to.new_window("window")
        driver.set_window_size(1000, 800)
        driver.get(f"{ctx.lb}/examples/logistic-regression/?client={client}&aggregation={aggregation}")
        handles.append(driver.current_window_handle)
    ctx.example_handle = handles[0]

    def wait_for(states, seconds):
        deadline = time.time() + seconds
        while True:
            pages = []
            for handle in handles:
                driver.switch_to.window(handle)
                pages.append(driver.execute_script(PAGE_STATE))
            if all(p and p["state"] in states for p in pages) or time.time() > deadline:
                return pages
            time.sleep(0.5)

    pages = wait_for(("waiting for the round", "done", "error"), 60)
    if all(p and p["state"] == "waiting for the round" for p in pages):
        print(f"    the three pages contributed (acks {[p['ack'] for p in pages]}); sealing {aggregation} at the root")
        ctx.cli(ctx.root, "seal", aggregation)
        pages = wait_for(("done", "error"), 60)
    for page in pages:
        print(f"    {page['clientId'] if page else '?'}: {page['state'] if page else 'no window.fedaggExample'}, "
              f"{page and page['weight']} examples, shows '{page and page['shown']}'")
    for client, page in zip(clients, pages):
        check(page is not None, f"page of {client}: no window.fedaggExample")
        check(page["state"] == "done", f"page of {client} ended '{page['state']}' (error: {page['error']}); "
                                       f"it shows '{page['shown']}'")
        check(page["clientId"] == client and page["aggregationId"] == aggregation,
              f"page of {client} reports client {page['clientId']}, aggregation {page['aggregationId']}")
        check(page["ack"] and page["ack"].get("aggregationId") == aggregation,
              f"page of {client}: ack {page['ack']}")
        progress = page["progress"]
        check(progress and progress["committed"] == progress["total"] == 36,
              f"page of {client}: last progress {progress}, expected 36 of 36 bytes committed")
    updates = np.array([p["update"] for p in pages], dtype=np.float32)
    weights = np.array([p["weight"] for p in pages], dtype=np.float64)
    check(updates.shape == (3, 9) and np.all(np.isfinite(updates)), f"the pages' updates: {updates}")
    check(len(set(weights.tolist())) == 3, f"the pages' weights {weights} are not distinct: a weighted mean "
                                           "would not differ from the plain one; choose other client ids")
    expected = (weights[:, None] * updates.astype(np.float64)).sum(axis=0) / weights.sum()
    plain = updates.astype(np.float64).mean(axis=0)
    tolerance = dict(rtol=1e-5, atol=1e-6 * float(np.abs(updates).max()))
    check(not np.allclose(plain, expected, **tolerance),
          "the plain mean of the updates is within tolerance of the weighted one: the check could not tell them apart")
    root_result = ctx.cli.result(ctx.root, aggregation, "weights")
    check(root_result.dtype == np.float32, f"the root's result is {root_result.dtype}, expected float32")
    check(np.allclose(root_result, expected, **tolerance),
          f"the root's result {root_result.tolist()} is not the weighted mean {expected.tolist()} "
          f"of the pages' updates (weights {weights.tolist()})")
    for client, page in zip(clients, pages):
        equal_arrays(np.array(page["result"], dtype=np.float32), root_result, f"the result page {client} shows")
    status = ctx.cli.status(ctx.root, aggregation)
    check(int(status.get("contributions", 0)) == 3, f"the root counted {status.get('contributions')}, expected 3")
    check(abs(float(status.get("weight_sum", status.get("weightSum", 0))) - weights.sum()) < 1e-9,
          f"the root's weight sum {status.get('weight_sum', status.get('weightSum'))}, expected {weights.sum()}")
    accuracies = {p["accuracy"] for p in pages}
    check(len(accuracies) == 1, f"the pages show different accuracies {accuracies} for one result")
    accuracy = accuracies.pop()
    check(accuracy > 0.85, f"the aggregated model's accuracy {accuracy} is too low for two blobs this far apart")
    for client, page in zip(clients, pages):
        check(page["shown"] == f"accuracy {accuracy:.3f}" and page["shownClass"] == "done",
              f"page of {client} shows '{page['shown']}' (class '{page['shownClass']}')")
    print(f"    result {np.round(root_result.astype(np.float64), 4).tolist()} = weighted mean of the 3 updates "
          f"(weights {weights.astype(int).tolist()}); accuracy {accuracy:.3f}")
    for handle in handles[1:]:
        driver.switch_to.window(handle)
        driver.close()
    driver.switch_to.window(handles[0])


def read_png(path):
    """(width, height, rows): rows a list of bytes, 3 or 4 bytes a pixel (RGB or RGBA, 8 bits)."""
    with open(path, "rb") as f:
        data = f.read()
    check(data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG")
    pos, idat = 8, []
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        chunk = data[pos + 8:pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            width, height, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", chunk)
        elif kind == b"IDAT":
            idat.append(chunk)
        elif kind == b"IEND":
            break
    check(depth == 8 and color in (2, 6) and interlace == 0,
          f"screenshot PNG: depth {depth}, color type {color}, interlace {interlace}; this reader takes 8-bit RGB(A)")
    bpp = 3 if color == 2 else 4
    raw = zlib.decompress(b"".join(idat))
    stride = width * bpp
    rows, prev = [], bytearray(stride)
    for y in range(height):
        kind = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        if kind == 1:
            for i in range(bpp, stride):
                line[i] = (line[i] + line[i - bpp]) & 0xFF
        elif kind == 2:
            line = bytearray((a + b) & 0xFF for a, b in zip(line, prev))
        elif kind == 3:
            for i in range(stride):
                left = line[i - bpp] if i >= bpp else 0
                line[i] = (line[i] + ((left + prev[i]) >> 1)) & 0xFF
        elif kind == 4:
            for i in range(stride):
                a = line[i - bpp] if i >= bpp else 0
                b = prev[i]
                c = prev[i - bpp] if i >= bpp else 0
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 0xFF
        else:
            check(kind == 0, f"screenshot PNG: unknown filter {kind} in row {y}")
        rows.append(bytes(line))
        prev = line
    return width, height, rows, bpp


def test_screenshot(ctx):
    driver = ctx.driver
    check(ctx.example_handle is not None, "no example page to take a picture of: (a) did not get that far")
    driver.switch_to.window(ctx.example_handle)
    shown = driver.execute_script(
        "const e = document.getElementById('result'); const r = e.getBoundingClientRect();"
        "return {text: e.textContent, left: r.left, top: r.top, width: r.width, height: r.height,"
        "        scale: window.devicePixelRatio, color: getComputedStyle(e).backgroundColor};")
    path = os.path.join(ctx.dir, "example-page.png")
    check(driver.save_screenshot(path), "the driver took no screenshot")
    width, height, rows, bpp = read_png(path)
    s = shown["scale"]
    x0, y0 = int(shown["left"] * s) + 6, int(shown["top"] * s) + 6
    x1, y1 = int((shown["left"] + shown["width"]) * s) - 6, int((shown["top"] + shown["height"]) * s) - 6
    check(0 <= x0 < x1 <= width and 0 <= y0 < y1 <= height,
          f"#result's rectangle ({x0},{y0})-({x1},{y1}) is not inside the {width}x{height} screenshot")

    def near(pixel, color):
        return all(abs(a - b) <= 24 for a, b in zip(pixel, color))

    inside = [rows[y][x * bpp:x * bpp + 3] for y in range(y0, y1) for x in range(x0, x1)]
    green = sum(near(p, GREEN) for p in inside) / len(inside)
    outside = rows[5][5 * bpp:5 * bpp + 3]
    print(f"    {path}: {width}x{height}; #result '{shown['text']}' at ({x0},{y0})-({x1},{y1}), "
          f"{green:.0%} of it {shown['color']}; the page's corner is rgb{tuple(outside)}")
    check(shown["text"].startswith("accuracy 0."), f"#result says '{shown['text']}'")
    check(green >= 0.6, f"only {green:.0%} of #result's rectangle in the screenshot is the green background "
                        f"rgb{GREEN} (computed style: {shown['color']}); the picture: {path}")
    check(not near(outside, GREEN), "the screenshot's corner is green too: the picture is not the page")


# --- (b) cut uploads -------------------------------------------------------------------------

CUT_UPLOAD = r"""
const [aggregation, clientId, chunkBytes] = args;
const log = [];
const logged = async (url, init) => {
  const entry = {method: init.method, url: String(url), offset: init.headers?.['Upload-Offset'] ?? null};
  log.push(entry);
  try {
    const r = await fetch(url, init);
    entry.status = r.status;
    if (init.method === 'GET' && String(url).includes('/v1/uploads')) {
      try { entry.committedSize = (await r.clone().json()).committedSize ?? '0'; } catch {}
    }
    return r;
  } catch (e) {
    entry.error = String(e);
    throw e;
  }
};
const client = new m.FedaggClient('', {fetch: logged});
const spec = (await client.aggregationStatus(aggregation)).spec;
const n = 4194304;
const w = new Float32Array(n);
for (let i = 0; i < n; i++) w[i] = (i % 4093) - 2046.5;
const update = m.encodeUpdate(spec, [w]);
let progress = null;
const t0 = performance.now();
const ack = await client.upload(aggregation, clientId, update, {chunkBytes, onProgress: (p) => { progress = p; }});
return {ack, progress, log, seconds: (performance.now() - t0) / 1000};
"""


def relay(ctx, command):
    with socket.create_connection(("127.0.0.1", ctx.relay_control), timeout=10) as s:
        s.sendall((command + "\n").encode())
        answer = s.makefile().readline().strip()
    check(answer and not answer.startswith("error"), f"relay: '{command}' answered '{answer}'")
    return answer


def cut_expected(n):
    return (np.arange(n) % 4093 - 2046.5).astype(np.float32)


def test_cut_uploads(ctx):
    total, chunk = 16 * MIB, MIB
    aggregations = []
    for fraction in (0.25, 0.5, 0.75):
        aggregation = f"cut-{int(fraction * 100)}"
        aggregations.append(aggregation)
        ctx.cli(ctx.root, "create", aggregation, "--type=<w=float32[4194304]>", "--intrinsics=federated_sum")
        open_module_page(ctx, ctx.relay)
        cut_at = int(fraction * total)
        relay(ctx, f"arm {cut_at} 1000")  # then a 1 s outage
        r = run_js(ctx.driver, CUT_UPLOAD, aggregation, f"cut-client-{int(fraction * 100)}", chunk)
        stats = json.loads(relay(ctx, "stats"))
        log, progress = r["log"], r["progress"]
        trail = "; ".join(f"{e['method']} {e['offset'] or ''} -> {e.get('status', e.get('error'))}"
                          + (f" (committed {e['committedSize']})" if "committedSize" in e else "") for e in log)
        print(f"    cut after {cut_at} bytes: {r['seconds']:.2f} s, sent {progress['sent']} of {total}, "
              f"relay passed {stats['up']} bytes up, {stats['refused']} connections refused in the outage")
        context = f"(cut at {cut_at}; requests: {trail})"
        check(stats["cuts"] == 1, f"the relay did not cut the upload {context}")
        failed = [i for i, e in enumerate(log) if "error" in e or e.get("status", 200) >= 500]
        check(failed, f"the page saw no failed request although the relay cut the connection {context}")
        first = log[failed[0]]
        check(first["method"] == "PATCH", f"the first failed request is a {first['method']}, not a write {context}")
        offset = int(first["offset"])
        check(offset <= cut_at < offset + chunk + 64 * 1024,
              f"the write that failed starts at {offset}, but the cut was at byte {cut_at} {context}")
        statuses = [e for e in log[failed[0]:] if e["method"] == "GET" and "committedSize" in e]
        check(statuses, f"after the cut the client never asked for the upload's status {context}")
        committed = int(statuses[0]["committedSize"])
        resumed = next((e for e in log[failed[0] + 1:] if e["method"] == "PATCH"), None)
        check(resumed is not None and int(resumed["offset"]) == committed,
              f"after the status said {committed} bytes were committed, the next write started at "
              f"{resumed and resumed['offset']} {context}")
        check(committed in (offset, offset + chunk), f"the server committed {committed} bytes after a cut in the write "
                                                      f"at {offset} {context}")
        check(progress["committed"] == progress["total"] == total, f"last progress {progress} {context}")
        check(total <= progress["sent"] <= total + chunk,
              f"the page sent {progress['sent']} bytes for a {total}-byte update: more than one chunk again {context}")
        check(stats["up"] <= total + chunk + 256 * 1024,
              f"{stats['up']} bytes went up through the relay for a {total}-byte update (with headers) {context}")
        check(int(r["ack"]["contributions"]) == 1, f"ack {r['ack']} {context}")
    for aggregation in aggregations:
        counted = ctx.cli.contributions(ctx.intermediate, aggregation)
        check(counted == 1, f"the intermediate counted {counted} contributions to {aggregation}, expected 1")
        ctx.cli.finalize(ctx.root, aggregation)
        counted = ctx.cli.contributions(ctx.root, aggregation)
        check(counted == 1, f"the root counted {counted} contributions to {aggregation}, expected 1")
        equal_arrays(ctx.cli.result(ctx.root, aggregation, "w"), cut_expected(4194304),
                     f"{aggregation}'s result (the update once)")
    print(f"    {', '.join(aggregations)}: each counted once, each result the update")


# --- (c) every request three times --------------------------------------------------------------

REPEATS = r"""
const [aggregation, clientId, chunkBytes] = args;
const spec = (await new m.FedaggClient('').aggregationStatus(aggregation)).spec;
const n = 300001;
const w = new Float32Array(n);
for (let i = 0; i < n; i++) w[i] = ((i * 37) % 1001) / 8 - 60;
const {header, bytes} = m.encodeUpdate(spec, [w]);
const path = '/v1/uploads' + q(aggregation, clientId);
const starts = [];
for (let k = 0; k < 3; k++) starts.push(await call('POST', path, {body: header}));
const writes = [];
for (let offset = 0; offset < bytes.length; offset += chunkBytes) {
  const piece = bytes.subarray(offset, Math.min(bytes.length, offset + chunkBytes));
  const last = offset + chunkBytes >= bytes.length;
  const send = () => call('PATCH', path, {body: piece, headers: h(offset, piece)});
  // The last chunk's three copies at once, as a browser re-sending a request may race it.
  const answers = last ? await Promise.all([send(), send(), send()]) : [await send(), await send(), await send()];
  writes.push({offset, end: offset + piece.length, concurrent: last, answers});
}
const submits = [];
for (let k = 0; k < 3; k++) submits.push(await call('POST', '/v1/uploads:submit' + q(aggregation, clientId), {body: {crc32c: m.crc32c(bytes)}}));
const after = await call('GET', path);
return {total: bytes.length, starts, writes, submits, after};
"""

RESULT = r"""
const [aggregation] = args;
const result = await new m.FedaggClient('').result(aggregation);
const f = result.fields[0];
return {contributions: result.status?.contributions, path: f.path, dtype: f.dtype, shape: f.shape,
        values: b64(new Uint8Array(f.values.buffer, f.values.byteOffset, f.values.byteLength))};
"""


def test_repeats(ctx):
    aggregation, chunk = "repeats", 256 * 1024
    ctx.cli(ctx.root, "create", aggregation, "--type=<w=float32[300001]>", "--intrinsics=federated_sum")
    open_module_page(ctx, ctx.lb)
    r = run_js(ctx.driver, REPEATS, aggregation, "repeat-client", chunk)
    total = r["total"]
    for k, start in enumerate(r["starts"]):
        expect(start, f"start #{k + 1}", 201 if k == 0 else 200, state="OPEN", committed=0)
    for write in r["writes"]:
        for k, answer in enumerate(write["answers"]):
            expect(answer, f"write {write['offset']}..{write['end']} #{k + 1}"
                   + (" (three at once)" if write["concurrent"] else ""), 200, state="OPEN", committed=write["end"])
    acks = []
    for k, submit in enumerate(r["submits"]):
        a = expect(submit, f"submit #{k + 1}", 200, state="COUNTED", committed=total)
        acks.append(a["json"].get("ack"))
    check(acks[0] and int(acks[0].get("contributions", 0)) == 1, f"the first submit's ack {acks[0]}")
    check(acks[0] == acks[1] == acks[2], f"repeated submits answered different acks: {acks}")
    expect(r["after"], "status after", 200, state="COUNTED", committed=total)
    counted = ctx.cli.contributions(ctx.intermediate, aggregation)
    check(counted == 1, f"the intermediate counted {counted} contributions, expected 1")
    ctx.cli.finalize(ctx.root, aggregation)
    counted = ctx.cli.contributions(ctx.root, aggregation)
    check(counted == 1, f"the root counted {counted} contributions, expected 1")
    expected = ((np.arange(300001) * 37 % 1001) / 8 - 60).astype(np.float32)
    result = run_js(ctx.driver, RESULT, aggregation)
    check(result["dtype"] == "float32" and result["shape"] == [300001] and result["path"] == "w",
          f"the result's field: {result['path']} {result['dtype']}{result['shape']}")
    equal_arrays(np.frombuffer(base64.b64decode(result["values"]), np.float32), expected,
                 "the result the page got (the update once)")
    equal_arrays(ctx.cli.result(ctx.root, aggregation, "w"), expected, "the root's result (the update once)")
    print("    counted once at the intermediate and the root; the result (the page's and the root's) is the update")


# --- (d) refusals -------------------------------------------------------------------------

REFUSALS = r"""
const [aggregation, clientId, expireAfterMs] = args;
const spec = (await new m.FedaggClient('').aggregationStatus(aggregation)).spec;
const w = new Float32Array(4194560);
for (let i = 0; i < w.length; i++) w[i] = i % 101;
const {header, bytes} = m.encodeUpdate(spec, [w]);
const path = '/v1/uploads' + q(aggregation, clientId);
const out = {total: bytes.length};
out.start = await call('POST', path, {body: header});
const first = bytes.subarray(0, 1000);
const next = bytes.subarray(1000, 2000);
out.write = await call('PATCH', path, {body: first, headers: h(0, first)});
out.wrongOffset = await call('PATCH', path, {body: next, headers: h(5000, next)});
out.badChecksum = await call('PATCH', path, {body: next, headers: {'Upload-Offset': '1000', 'Upload-Crc32c': String((m.crc32c(next) ^ 1) >>> 0)}});
out.afterBadChecksum = await call('GET', path);
const changed = first.slice();
changed[10] ^= 0xff;
out.changedBytes = await call('PATCH', path, {body: changed, headers: h(0, changed)});
out.noChecksum = await call('PATCH', path, {body: next, headers: {'Upload-Offset': '1000'}});
const big = bytes.subarray(1000, 1000 + 16 * 1048576 + 1);
out.oversized = await call('PATCH', path, {body: big, headers: h(1000, big)});
out.afterOversized = await call('GET', path);
out.earlySubmit = await call('POST', '/v1/uploads:submit' + q(aggregation, clientId), {body: {crc32c: m.crc32c(bytes)}});
if (expireAfterMs) {
  await new Promise((resolve) => setTimeout(resolve, expireAfterMs));  // no request meanwhile
  out.expiredWrite = await call('PATCH', path, {body: next, headers: h(1000, next)});
  out.expiredStatus = await call('GET', path);
  out.restart = await call('POST', path, {body: header});
  out.abortRestart = await call('DELETE', path);
} else {
  out.abort = await call('DELETE', path);
  out.afterAbort = await call('GET', path);
  out.writeAfterAbort = await call('PATCH', path, {body: next, headers: h(1000, next)});
  out.restart = await call('POST', path, {body: header});
  out.abortRestart = await call('DELETE', path);
}
return out;
"""


def test_refusals(ctx, base, where, expire):
    aggregation = f"refusals-{where}"
    # 16 MiB + 1 KiB: a 16 MiB + 1 byte write at offset 1000 fits the update, and is refused
    # only for its size.
    ctx.cli(ctx.root, "create", aggregation, "--type=<w=float32[4194560]>", "--intrinsics=federated_sum")
    open_module_page(ctx, base)
    r = run_js(ctx.driver, REFUSALS, aggregation, "refused-client", 5000 if expire else 0)
    start = expect(r["start"], "start", 201, state="OPEN", committed=0)
    check(int(start["json"].get("maxChunkBytes", 0)) == MAX_CHUNK and int(start["json"].get("totalSize", 0)) == r["total"],
          f"start: maxChunkBytes {start['json'].get('maxChunkBytes')} (expected {MAX_CHUNK}), "
          f"totalSize {start['json'].get('totalSize')} (expected {r['total']})")
    expect(r["write"], "write 0..1000", 200, state="OPEN", committed=1000)
    expect(r["wrongOffset"], "write at 5000 (committed 1000)", 409, code="ABORTED", committed=1000)
    expect(r["badChecksum"], "write with a wrong Upload-Crc32c", 500, code="DATA_LOSS")
    expect(r["afterBadChecksum"], "status after the bad checksum", 200, state="OPEN", committed=1000)
    expect(r["changedBytes"], "write 0..1000 again with other bytes", 400, code="FAILED_PRECONDITION")
    expect(r["noChecksum"], "write without Upload-Crc32c", 400, code="INVALID_ARGUMENT")
    expect(r["oversized"], "write of 16 MiB + 1 byte", 413, code="RESOURCE_EXHAUSTED")
    expect(r["afterOversized"], "status after the oversized write", 200, state="OPEN", committed=1000)
    expect(r["earlySubmit"], "submit at 1000 of 16 MiB + 1 KiB", 400, code="FAILED_PRECONDITION", committed=1000)
    if expire:
        expect(r["expiredWrite"], "write after 5 s idle (--upload_idle_timeout=2s)", 404, code="NOT_FOUND")
        expect(r["expiredStatus"], "status after 5 s idle", 404, code="NOT_FOUND")
        expect(r["restart"], "start again after the expiry", 201, state="OPEN", committed=0)
        expect(r["abortRestart"], "abort", 200, state="ABORTED")
    else:
        expect(r["abort"], "abort", 200, state="ABORTED")
        # The spec does not say what a request about an aborted upload answers: unknown
        # (NOT_FOUND) or the aborted upload (ABORTED; a write refused). Either way nothing is
        # written, and a start begins a new upload at 0.
        after = answer_of(r["afterAbort"], "status after the abort")
        check((after["status"], after["code"]) == (404, "NOT_FOUND") or (after["status"], after["state"]) == (200, "ABORTED"),
              f"status after the abort: {json.dumps(after['raw'])[:400]}, expected NOT_FOUND or ABORTED")
        print(f"    status after the abort: HTTP {after['status']} {after['code'] or after['state']}")
        write = answer_of(r["writeAfterAbort"], "write after the abort")
        check((write["status"], write["code"]) in ((404, "NOT_FOUND"), (400, "FAILED_PRECONDITION")),
              f"write after the abort: {json.dumps(write['raw'])[:400]}, expected NOT_FOUND or FAILED_PRECONDITION")
        print(f"    write after the abort: HTTP {write['status']} {write['code']}")
        expect(r["restart"], "start again after the abort", 201, state="OPEN", committed=0)
        expect(r["abortRestart"], "abort", 200, state="ABORTED")
    server = ctx.root if where == "root" else ctx.intermediate
    counted = ctx.cli.contributions(server, aggregation)
    check(counted == 0, f"{counted} contributions counted to {aggregation} from refused writes")


# --- (f) the client's recovery paths -----------------------------------------------------------

RECOVERY = r"""
const [aggregation, clientId, chunkBytes, idleMs] = args;
const log = [];
let writes = 0;
// A fetch that spoils some writes as a faulty network or a stale client would: the 2nd
// write's checksum damaged (DATA_LOSS), the 4th sent with an offset one chunk ahead
// (ABORTED, with the committed size), the 6th held back until the upload expired (NOT_FOUND).
const faulty = async (url, init) => {
  const entry = {method: init.method, offset: init.headers?.['Upload-Offset'] ?? null};
  if (init.method === 'PATCH') {
    writes++;
    const headers = {...init.headers};
    if (writes === 2) headers['Upload-Crc32c'] = String((Number(headers['Upload-Crc32c']) ^ 1) >>> 0);
    if (writes === 4) headers['Upload-Offset'] = String(Number(headers['Upload-Offset']) + chunkBytes);
    if (writes === 6) await new Promise((resolve) => setTimeout(resolve, idleMs));
    init = {...init, headers};
    entry.sentOffset = headers['Upload-Offset'];
  }
  log.push(entry);
  const r = await fetch(url, init);
  entry.status = r.status;
  if (!r.ok) { try { entry.code = (await r.clone().json()).code; } catch {} }
  return r;
};
const client = new m.FedaggClient('', {fetch: faulty});
const spec = (await client.aggregationStatus(aggregation)).spec;
const n = 262147;
const w = new Float32Array(n);
for (let i = 0; i < n; i++) w[i] = (i % 77) - 38;
let progress = null;
const ack = await client.contribute(spec, clientId, [w], {chunkBytes, onProgress: (p) => { progress = p; },
                                                          backoffBaseMs: 50});
return {ack, progress, log};
"""


def test_recovery(ctx):
    aggregation, chunk = "recovery", 256 * 1024
    ctx.cli(ctx.root, "create", aggregation, "--type=<w=float32[262147]>", "--intrinsics=federated_sum")
    open_module_page(ctx, ctx.root_http)
    r = run_js(ctx.driver, RECOVERY, aggregation, "recovering-client", chunk, 4000)
    log = r["log"]
    trail = "; ".join(f"{e['method']} {e.get('sentOffset') or ''} -> {e['status']} {e.get('code') or ''}" for e in log)
    print(f"    requests: {trail}")
    codes = [(e["method"], e["status"], e.get("code")) for e in log]
    for wanted in (("PATCH", 500, "DATA_LOSS"), ("PATCH", 409, "ABORTED"), ("PATCH", 404, "NOT_FOUND")):
        check(wanted in codes, f"no write answered {wanted[1]} {wanted[2]}: the fault was not made ({trail})")
    after_loss = codes.index(("PATCH", 500, "DATA_LOSS")) + 1
    check(codes[after_loss] == ("PATCH", 200, None) and log[after_loss]["offset"] == log[after_loss - 1]["offset"],
          f"after DATA_LOSS the client did not write the same chunk again ({trail})")
    aborted = codes.index(("PATCH", 409, "ABORTED"))
    check(codes[aborted + 1][:2] == ("PATCH", 200) and log[aborted + 1]["offset"] == log[aborted]["offset"],
          f"after ABORTED the client did not write from the committed size ({trail})")
    lost = codes.index(("PATCH", 404, "NOT_FOUND"))
    check(codes[lost + 1] == ("POST", 201, None) and log[lost + 2]["offset"] == "0",
          f"after NOT_FOUND (expired) the client did not start again from 0 ({trail})")
    total = 262147 * 4
    check(r["progress"]["committed"] == total, f"last progress {r['progress']}")
    check(int(r["ack"]["contributions"]) == 1, f"ack {r['ack']}")
    ctx.cli.finalize(ctx.root, aggregation)
    check(ctx.cli.contributions(ctx.root, aggregation) == 1, "the root did not count the update once")
    equal_arrays(ctx.cli.result(ctx.root, aggregation, "w"), (np.arange(262147) % 77 - 38).astype(np.float32),
                 "the result (the update once)")
    print("    damaged checksum retried, stale offset resynchronised, expired upload started again; counted once")


# --- main -----------------------------------------------------------------------------------


def main():
    parser = argparse.ArgumentParser()
    for name in ("client", "root", "intermediate", "lb", "relay", "root_http", "dir", "js"):
        parser.add_argument(f"--{name}", required=True)
    parser.add_argument("--relay_control", type=int, required=True)
    ctx = parser.parse_args()
    ctx.cli = Cli(ctx.client, ctx.dir)
    ctx.example_handle = None
    ctx.driver = start_browser()
    tests = [
        ("(0) the server serves client_stub/js", lambda: test_served_files(ctx)),
        ("(a) the example page's round, 3 pages, through nginx to root + intermediate", lambda: test_example_round(ctx)),
        ("(e) a screenshot of the finished example page", lambda: test_screenshot(ctx)),
        ("(c) start, every chunk and the submit three times", lambda: test_repeats(ctx)),
        ("(d) refusals through nginx (the intermediate)", lambda: test_refusals(ctx, ctx.lb, "intermediate", False)),
        ("(d) refusals at the root, and an expired upload", lambda: test_refusals(ctx, ctx.root_http, "root", True)),
        ("(b) 16 MiB uploads cut at 25%, 50% and 75%", lambda: test_cut_uploads(ctx)),
        ("(f) the client's recovery: damaged chunk, stale offset, expired upload", lambda: test_recovery(ctx)),
    ]
    only = os.environ.get("FEDAGG_BROWSER_ONLY")  # e.g. "a,e": run those checks alone
    if only:
        tests = [(name, test) for name, test in tests if name[1] in only.split(",")]
    failed = []
    try:
        for name, test in tests:
            print(f"{name}", flush=True)
            started = time.time()
            try:
                test()
                print(f"  PASS ({time.time() - started:.1f} s)", flush=True)
            except Exception as e:  # noqa: BLE001: every failure is reported, then the next check runs
                failed.append(name)
                print(f"  FAIL: {e}", flush=True)
                if not isinstance(e, AssertionError):
                    traceback.print_exc()
                try:
                    for entry in ctx.driver.get_log("browser")[-20:]:
                        print(f"    browser console: {entry['level']} {entry['message'][:300]}")
                except Exception:  # noqa: BLE001
                    pass
    finally:
        ctx.driver.quit()
    if failed:
        print(f"FAILED {len(failed)} of {len(tests)}: {'; '.join(failed)}")
        sys.exit(1)
    print(f"all {len(tests)} browser checks passed")


if __name__ == "__main__":
    main()
