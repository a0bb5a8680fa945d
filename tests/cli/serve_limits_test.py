"""dtrain serve on a hostile network, over raw sockets on loopback: every limit and timeout
of the HTTP layer answers with its status in OpenAI's error shape and is counted in
/metrics; the server's memory stays near its idle size across 100 oversized, deeply nested
and compressed requests; 256 slow connections held open do not delay /health or a
completion; pipelined requests, a client that half-closes, HTTP/1.0 and a wrong method get
the right answers; a reset non-streamed request is aborted and its KV blocks freed;
SIGTERM with slow connections held exits within the drain deadline, and streams cut off
by it get a final error event.

usage: serve_limits_test.py DTRAIN CHECKPOINT CONTEXT [--sanitized]
(--sanitized: a sanitizer build; its time bounds are 10x and its memory is not compared.)
"""
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import threading
import time

dtrain, ckpt, context = sys.argv[1], sys.argv[2], int(sys.argv[3])
slow_factor = 10 if "--sanitized" in sys.argv[4:] else 1
procs = []


def fail(msg):
    print(f"FAIL (serve limits): {msg}")
    for p in procs:
        if p.poll() is None:
            p.kill()
    sys.exit(1)


def on_uncaught(kind, value, tb):
    """An exception the checks did not expect still ends every server this test started,
    so the test fails at once instead of waiting for ctest's timeout on a live child."""
    sys.__excepthook__(kind, value, tb)
    fail(f"uncaught {kind.__name__}: {value}")


sys.excepthook = on_uncaught


def start(*flags):
    port_file = f"lport{os.getpid()}_{len(procs)}.txt"
    if os.path.exists(port_file):
        os.remove(port_file)
    p = subprocess.Popen([dtrain, "serve", "--checkpoint", ckpt, "--port", "0", "--port-file", port_file,
                          "--kv-blocks", "64", "--block-size", "8", *flags], stderr=subprocess.PIPE, text=True)
    procs.append(p)
    for _ in range(600):
        if os.path.exists(port_file) and open(port_file).read().strip():
            return p, int(open(port_file).read())
        if p.poll() is not None:
            fail("the server exited: " + p.stderr.read())
        time.sleep(0.05)
    fail("the server did not start")


def connect(port, timeout=10):
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def read_all(s):
    out = b""
    while True:
        try:
            b = s.recv(65536)
        except (ConnectionResetError, socket.timeout):
            break
        if not b:
            break
        out += b
    return out


def read_response(s, buf=b""):
    """One response off s: (status, headers dict, body bytes, rest of the buffer)."""
    while b"\r\n\r\n" not in buf:
        b = s.recv(65536)
        if not b:
            fail(f"connection closed before a response head: {buf!r}")
        buf += b
    head, buf = buf.split(b"\r\n\r\n", 1)
    lines = head.decode().split("\r\n")
    status = int(lines[0].split()[1])
    hs = {k.lower(): v.strip() for k, v in (l.split(":", 1) for l in lines[1:])}
    if "content-length" in hs:
        n = int(hs["content-length"])
        while len(buf) < n:
            b = s.recv(65536)
            if not b:
                fail("connection closed inside a body")
            buf += b
        return status, hs, buf[:n], buf[n:]
    if hs.get("transfer-encoding") == "chunked":
        body = b""
        while True:
            while b"\r\n" not in buf:
                buf += s.recv(65536)
            size_line, buf = buf.split(b"\r\n", 1)
            size = int(size_line, 16)
            while len(buf) < size + 2:
                buf += s.recv(65536)
            body, buf = body + buf[:size], buf[size + 2:]
            if size == 0:
                return status, hs, body, buf
    return status, hs, buf + read_all(s), b""


def post(port, path, body, extra=""):
    data = json.dumps(body).encode() if not isinstance(body, bytes) else body
    return (f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n{extra}"
            f"Content-Length: {len(data)}\r\n\r\n").encode() + data


def call(port, raw, timeout=10):
    s = connect(port, timeout)
    s.sendall(raw)
    r = read_response(s)
    s.close()
    return r


def expect_status(port, raw, status, what, code=None):
    st, hs, body, _ = call(port, raw)
    if st != status:
        fail(f"{what}: HTTP {st} (wanted {status}) {body[:300]!r}")
    if status >= 400:
        err = json.loads(body)["error"]
        if not err.get("message") or (code and err.get("code") != code):
            fail(f"{what}: error body {err}")
    return hs, body


def metrics(port):
    st, _, body, _ = call(port, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
    m = {}
    for line in body.decode().splitlines():
        if line and not line.startswith("#"):
            k, v = line.rsplit(" ", 1)
            m[k] = float(v)
    return m, body.decode()


def rss_kb(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def greedy(port, prompt, n):
    st, _, body, _ = call(port, post(port, "/v1/completions", {"model": "dtrain", "prompt": prompt, "max_tokens": n,
                                                               "temperature": 0}))
    if st != 200:
        fail(f"completion: {st} {body!r}")
    return json.loads(body)


proc, port = start("--header-timeout", "2", "--body-timeout", "2", "--idle-timeout", "4", "--write-timeout", "3")

# ---- Each limit, its status, its count.
big = 100 << 20
expect_status(port, f"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: {big}\r\n\r\n".encode() + b"{" * 1000,
              413, "a 100 MB body announced", "body_too_large")
chunk = b"x" * 65536
raw = b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" + \
      (b"10000\r\n" + chunk + b"\r\n") * 20
expect_status(port, raw, 413, "a chunked body over the limit", "body_too_large")
expect_status(port, b"GET /health HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * (20 << 10) + b"\r\n\r\n", 431,
              "20 kB of headers", "headers_too_large")
expect_status(port, b"GET /health HTTP/1.1\r\n" + b"".join(b"X-%d: 1\r\n" % i for i in range(100)) + b"\r\n", 431,
              "100 header lines", "headers_too_large")
expect_status(port, post(port, "/v1/completions", b"\x1f\x8b" + b"\0" * 100, "Content-Encoding: gzip\r\n"), 415,
              "a gzip body")
expect_status(port, post(port, "/v1/completions", b"[" * 200000), 400, "200,000 levels of nesting")
expect_status(port, post(port, "/v1/completions", b'{"model": "dtrain", "prompt": "a", "max_tokens": 1, "max_tokens": 2}'),
              400, "a key twice")
expect_status(port, b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n",
              400, "Content-Length with chunked")
# A head that never ends: 408 after --header-timeout (2 s), one header byte a second.
s = connect(port)
s.sendall(b"GET /health HTTP/1.1\r\n")
t0 = time.time()
try:
    for c in b"X-Slow: 1234567890":
        s.sendall(bytes([c]))
        time.sleep(0.5)
except OSError:
    pass
st, _, body, _ = read_response(s)
if st != 408 or not 1.5 <= time.time() - t0 <= 6 * slow_factor:
    fail(f"slow headers: HTTP {st} after {time.time() - t0:.1f} s")
s.close()
m, text = metrics(port)
for key, least in (('dtrain_http_refused_total{reason="body_too_large"}', 2),
                   ('dtrain_http_refused_total{reason="headers_too_large"}', 2),
                   ('dtrain_http_refused_total{reason="timeout"}', 1)):
    if m.get(key, 0) < least:
        fail(f"/metrics {key} = {m.get(key)}; wanted >= {least}")
if "# TYPE dtrain_http_requests_total counter" not in text or "# TYPE dtrain_requests_total counter" not in text:
    fail("/metrics: counters not typed as counters")
for line in text.splitlines():
    if line.startswith("# TYPE") and line.split()[2].endswith("_total") and line.split()[3] != "counter":
        fail(f"/metrics: {line}")

# ---- Memory: 100 hostile requests leave the resident size near its idle size.
idle = rss_kb(proc.pid)
for i in range(100):
    kind = i % 3
    try:
        if kind == 0:
            call(port, f"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: {big}\r\n\r\n".encode() + b"[" * (1 << 20))
        elif kind == 1:
            call(port, post(port, "/v1/completions", b"[" * 900000))
        else:
            call(port, post(port, "/v1/completions", b"\x1f\x8b" + os.urandom(10000), "Content-Encoding: gzip\r\n"))
    except OSError:
        pass  # the server answers and closes before the whole body is sent
grown = (rss_kb(proc.pid) - idle) / 1024
if grown > 64 and slow_factor == 1:
    fail(f"resident memory grew by {grown:.0f} MB over 100 hostile requests")

# ---- 256 slow connections (4 x cpp-httplib's old pool of 64): /health and a completion still
# answer within a second.
want = greedy(port, "the quick", 8)["choices"][0]["text"]
slow = []
for _ in range(256):
    c = connect(port)
    c.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n")
    slow.append(c)
stop_drip = threading.Event()


def drip():
    while not stop_drip.is_set():
        for c in slow:
            try:
                c.sendall(b"X")
            except OSError:
                pass
        time.sleep(0.5)


dripper = threading.Thread(target=drip)
dripper.start()
time.sleep(0.5)
t0 = time.time()
st, _, body, _ = call(port, b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
t_health = time.time() - t0
t0 = time.time()
got = greedy(port, "the quick", 8)["choices"][0]["text"]
t_completion = time.time() - t0
if st != 200 or t_health > slow_factor or t_completion > slow_factor or got != want:
    fail(f"with 256 slow connections: /health {st} in {t_health:.2f} s, completion in {t_completion:.2f} s {got!r}")
stop_drip.set()
dripper.join()

# ---- Pipelining, half-close, HTTP/1.0, methods, models.
s = connect(port)
s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n" +
          post(port, "/v1/completions", {"model": "dtrain", "prompt": "the quick", "max_tokens": 8, "temperature": 0}) +
          b"GET /v1/models/dtrain HTTP/1.1\r\nHost: x\r\n\r\n")
st1, _, _, rest = read_response(s)
st2, _, b2, rest = read_response(s, rest)
st3, _, b3, rest = read_response(s, rest)
s.close()
if (st1, st2, st3) != (200, 200, 200) or json.loads(b2)["choices"][0]["text"] != want or json.loads(b3)["id"] != "dtrain":
    fail(f"pipelined: {st1} {st2} {st3} {b2!r} {b3!r}")
s = connect(port)
s.sendall(post(port, "/v1/completions", {"model": "dtrain", "prompt": "the quick", "max_tokens": 8, "temperature": 0}))
s.shutdown(socket.SHUT_WR)
st, hs, body, _ = read_response(s)
if st != 200 or json.loads(body)["choices"][0]["text"] != want:
    fail(f"half-closed client: {st} {body!r}")
s = connect(port)
data = json.dumps({"model": "dtrain", "prompt": "the quick", "max_tokens": 8, "temperature": 0, "stream": True}).encode()
s.sendall(b"POST /v1/completions HTTP/1.0\r\nContent-Length: %d\r\n\r\n" % len(data) + data)
st, hs, body, _ = read_response(s)
if st != 200 or "transfer-encoding" in hs or not body.endswith(b"data: [DONE]\n\n"):
    fail(f"HTTP/1.0 stream: {st} {hs} {body[-200:]!r}")
text = "".join(json.loads(l[6:])["choices"][0]["text"] for l in body.decode().split("\n")
               if l.startswith("data: {") and json.loads(l[6:]).get("choices"))
if text != want:
    fail(f"HTTP/1.0 stream text {text!r} != {want!r}")
hs, _ = expect_status(port, b"GET /v1/completions HTTP/1.1\r\nHost: x\r\n\r\n", 405, "GET on a POST route")
if hs.get("allow") != "POST":
    fail(f"405 without Allow: POST: {hs}")
expect_status(port, b"POST /health HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n", 405, "POST /health")
expect_status(port, b"GET /v1/models/other HTTP/1.1\r\nHost: x\r\n\r\n", 404, "another model's card", "model_not_found")
expect_status(port, b"GET /nothing HTTP/1.1\r\nHost: x\r\n\r\n", 404, "no such endpoint")

# ---- Request fields: bounds stated right, seeds that would wrap refused.
for body, param, words in (({"top_p": 0}, "top_p", "greater than 0"), ({"seed": 2 ** 63}, "seed", "2^63-1"),
                           ({"top_k": -2}, "top_k", "-1 or 0"), ({"n": 17}, "n", "1 to 16"),
                           ({"best_of": 1, "n": 2}, "best_of", "n (2)"),
                           ({"logit_bias": {"99999": 1}}, "logit_bias", "token id"),
                           ({"presence_penalty": 3}, "presence_penalty", "-2 to 2"),
                           ({"echo": True, "logprobs": 1}, "echo", "not both")):
    _, b = expect_status(port, post(port, "/v1/completions", {"model": "dtrain", "prompt": "x", "max_tokens": 2, **body}),
                         400, f"bad {param}")
    err = json.loads(b)["error"]
    if err["param"] != param or words not in err["message"]:
        fail(f"{body}: {err}")

# ---- A non-streamed request whose client resets is aborted, its blocks freed.
def ended(m):
    return sum(m.get(f'dtrain_requests_total{{state="{k}"}}', 0) for k in ("finished", "aborted", "rejected"))


before = metrics(port)[0].get('dtrain_requests_total{state="aborted"}', 0)
caught = False
for attempt in range(20):
    s = connect(port)
    s.sendall(post(port, "/v1/completions", {"model": "dtrain", "prompt": "t", "max_tokens": context - 1, "n": 16,
                                             "seed": attempt}))
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    time.sleep(0.002 * attempt)
    s.close()  # a reset
    for _ in range(200):
        m = metrics(port)[0]
        if m['dtrain_requests{state="running"}'] == 0 and m['dtrain_requests{state="waiting"}'] == 0:
            break
        time.sleep(0.02)
    if m.get('dtrain_requests_total{state="aborted"}', 0) > before:
        caught = True
        break
if not caught or m['dtrain_kv_blocks{state="used"}'] != 0:
    fail(f"a reset non-streamed request was not aborted in 20 tries, or its blocks stayed: {m}")

# ---- SIGTERM with slow connections held: the drain ends on time, the slow ones closed.
held = [connect(port) for _ in range(64)]
for c in held:
    c.sendall(b"POST /v1/completions HTTP/1.1\r\n")
t0 = time.time()
proc.send_signal(signal.SIGTERM)
rc = proc.wait(timeout=30)
if rc != 0 or time.time() - t0 > 3 * slow_factor:
    fail(f"SIGTERM with 64 slow connections: exit {rc} after {time.time() - t0:.1f} s")

# ---- A drain deadline that cuts streams off: each gets an error event and [DONE]; exit 3.
# --max-num-seqs 1 runs the 16 choices of a stream one after another, so a stream whose
# head has arrived is still running when the signal comes (--drain-seconds 0).
proc, port = start("--max-num-seqs", "1", "--drain-seconds", "0")
results, started = [], threading.Event()


def long_stream():
    s = connect(port, 60)
    s.sendall(post(port, "/v1/completions", {"model": "dtrain", "prompt": "t", "max_tokens": context - 1, "n": 16,
                                             "temperature": 1, "stream": True}))
    buf = b""
    while b"\r\n\r\n" not in buf:
        b = s.recv(65536)
        if not b:
            break
        buf += b
    started.set()
    results.append(read_response(s, buf))


def wait_running(port):
    """Until the server runs a request: a stream's head can come before its request reaches
    the scheduler, and a signal in between finds nothing to drain (slow under TSan)."""
    for _ in range(int(500 * slow_factor)):
        if metrics(port)[0].get('dtrain_requests{state="running"}', 0) >= 1:
            return
        time.sleep(0.01)
    fail("no request running after a stream's head came")


def ended_well(r):
    """A stream that began ends with [DONE]; one whose request reached the server after the
    signal (the threads race it) is refused whole, with a 503 naming the drain."""
    return r[2].endswith(b"data: [DONE]\n\n") or (r[0] == 503 and b"draining" in r[2])


streams = [threading.Thread(target=long_stream) for _ in range(4)]
for t in streams:
    t.start()
started.wait(30)
wait_running(port)
t0 = time.time()
proc.send_signal(signal.SIGTERM)
rc = proc.wait(timeout=30)
took = time.time() - t0
for t in streams:
    t.join()
cut = [r for r in results if b'"cut_off"' in r[2]]
if rc != 3 or took > (0 + 1.5) * slow_factor or not all(ended_well(r) for r in results):
    fail(f"drain deadline: exit {rc} after {took:.1f} s; streams {[r[2][-120:] for r in results]}")
if not cut:
    fail("exit 3 but no stream got the cut-off event")

# ---- A second signal ends at once (exit 128 + its number), streams still get [DONE].
proc, port = start("--max-num-seqs", "1", "--drain-seconds", "60")
results, started = [], threading.Event()
streams = [threading.Thread(target=long_stream) for _ in range(4)]
for t in streams:
    t.start()
started.wait(30)
wait_running(port)
proc.send_signal(signal.SIGTERM)
time.sleep(0.02)
t1 = time.time()
proc.send_signal(signal.SIGINT)
rc2 = proc.wait(timeout=30)
took2 = time.time() - t1
for t in streams:
    t.join()
if rc2 != 128 + signal.SIGINT or took2 > 1.5 * slow_factor or not all(ended_well(r) for r in results):
    fail(f"second signal: exit {rc2} after {took2:.1f} s; streams {[r[2][-120:] for r in results]}")
print(f"serve limits: ok; idle RSS {idle / 1024:.0f} MB, +{grown:.0f} MB after 100 hostile requests; "
      f"with 256 slow connections /health {1e3 * t_health:.0f} ms, completion {1e3 * t_completion:.0f} ms; "
      f"reset caught on try {attempt + 1}; drain deadline: exit {rc} in {took:.1f} s, {len(cut)} of 4 streams cut off; "
      f"a second signal: exit {rc2} in {took2:.2f} s")
