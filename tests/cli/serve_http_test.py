"""dtrain serve over loopback, with the standard library's HTTP client: completions whole and
streamed (server-sent events in OpenAI's chunk shape) give `dtrain generate`'s greedy text;
concurrent clients; a client that disconnects mid-stream (its request is aborted and its KV
blocks freed); stop strings; bad requests (malformed JSON, unknown fields, a prompt longer
than the context, max_tokens <= 0, another model, n = 2, chat completions of a checkpoint)
get OpenAI-style errors; Ctrl-C drains a stream in flight and exits 0.

usage: serve_http_test.py DTRAIN CHECKPOINT CONTEXT [extra serve flags...]
(SERVE_LAUNCH, if set, prefixes the server's command: "mpirun -np 2 --oversubscribe")
"""
import http.client
import json
import os
import shlex
import signal
import subprocess
import sys
import threading
import time

dtrain, ckpt, context = sys.argv[1], sys.argv[2], int(sys.argv[3])
extra = sys.argv[4:]
tag = " ".join(extra) or "one rank"


proc = None  # the server, once started


def fail(msg):
    print(f"FAIL ({tag}): {msg}")
    if proc is not None and proc.poll() is None:
        proc.kill()  # a server left running would hold ctest's pipe open until its timeout
    sys.exit(1)


port_file = f"port{os.getpid()}.txt"
if os.path.exists(port_file):
    os.remove(port_file)
launch = shlex.split(os.environ.get("SERVE_LAUNCH", ""))
tag = (" ".join(launch[:3]) + " " + tag).strip() if launch else tag
proc = subprocess.Popen(launch + [dtrain, "serve", "--checkpoint", ckpt, "--port", "0", "--port-file", port_file,
                         "--kv-blocks", "64", "--block-size", "8", "--json", f"stats{os.getpid()}.json"] + extra,
                        stderr=subprocess.PIPE, text=True)
for _ in range(300):
    if os.path.exists(port_file) and open(port_file).read().strip():
        break
    if proc.poll() is not None:
        fail("the server exited: " + proc.stderr.read())
    time.sleep(0.05)
port = int(open(port_file).read())


def request(method, path, body=None, raw=None):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    data = raw if raw is not None else (json.dumps(body) if body is not None else None)
    c.request(method, path, body=data, headers={"Content-Type": "application/json"})
    r = c.getresponse()
    text = r.read().decode("utf-8", "replace")
    c.close()
    return r.status, text


def complete(prompt, max_tokens, **kw):
    body = dict(dict(model="dtrain", prompt=prompt, max_tokens=max_tokens, temperature=0), **kw)
    status, text = request("POST", "/v1/completions", body)
    if status != 200:
        fail(f"completion {prompt!r}: HTTP {status} {text}")
    return json.loads(text)


usages = []


def stream(prompt, max_tokens, stop_after=None, **kw):
    """The chunks' texts and the last finish_reason; stop_after: disconnect after that many
    chunks (0: right after sending the request, before the first chunk can arrive)."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    body = dict(model="dtrain", prompt=prompt, max_tokens=max_tokens, temperature=0, stream=True, **kw)
    c.request("POST", "/v1/completions", body=json.dumps(body), headers={"Content-Type": "application/json"})
    if stop_after == 0:
        c.sock.close()
        return [], None, False
    r = c.getresponse()
    if r.status != 200 or not r.getheader("Content-Type", "").startswith("text/event-stream"):
        fail(f"stream: HTTP {r.status} {r.getheader('Content-Type')}")
    texts, finish, done = [], None, False
    while True:
        line = r.fp.readline().decode("utf-8", "replace")
        if not line:
            break
        line = line.strip()
        if not line.startswith("data: "):
            continue
        payload = line[len("data: "):]
        if payload == "[DONE]":
            done = True
            break
        chunk = json.loads(payload)
        if chunk.get("usage") and chunk["choices"] == []:  # stream_options.include_usage: after the last
            usages.append(chunk["usage"])
            continue
        if chunk["object"] != "text_completion" or len(chunk["choices"]) != 1 or not chunk["id"].startswith("cmpl-"):
            fail(f"chunk shape: {chunk}")
        texts.append(chunk["choices"][0]["text"])
        finish = chunk["choices"][0]["finish_reason"]
        if stop_after is not None and len(texts) >= stop_after:
            c.sock.close()  # the client goes away mid-stream
            return texts, None, False
    c.close()
    return texts, finish, done


def metrics():
    status, text = request("GET", "/metrics")
    if status != 200:
        fail(f"/metrics: HTTP {status}")
    m = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            k, v = line.rsplit(" ", 1)
            m[k] = float(v)
    return m


# Health and models.
status, text = request("GET", "/health")
if status != 200 or json.loads(text)["status"] != "ok":
    fail(f"/health: {status} {text}")
status, text = request("GET", "/v1/models")
if status != 200 or json.loads(text)["data"][0]["id"] != "dtrain":
    fail(f"/v1/models: {status} {text}")

# A whole completion: `dtrain generate`'s greedy text, with OpenAI's shape.
prompt, n = "the quick", 12
ref = subprocess.run([dtrain, "generate", "--checkpoint", ckpt, "--prompt", prompt, "--max-new-tokens", str(n),
                      "--json", "gen.json"], capture_output=True, text=True)
if ref.returncode != 0:
    fail("dtrain generate: " + ref.stderr)
want = json.load(open("gen.json"))["text"]
got = complete(prompt, n)
if got["choices"][0]["text"] != want:
    fail(f"completion {got['choices'][0]['text']!r} != dtrain generate's {want!r}")
if got["choices"][0]["finish_reason"] != "length" or got["usage"] != {"prompt_tokens": len(prompt),
                                                                       "completion_tokens": n,
                                                                       "total_tokens": len(prompt) + n}:
    fail(f"completion fields: {got}")

# Streamed: the same text in chunks, a last chunk with the finish reason, then [DONE].
texts, finish, done = stream(prompt, n)
if "".join(texts) != want or finish != "length" or not done:
    fail(f"stream: {texts} {finish} {done}")

# Concurrent clients, streamed and whole: each gets its prompt's text.
prompts = ["the lazy", "over the ", "brown fox", "jumps", "dog. the", "quick bro", "azy dog", "fox jum"]
refs = {p: complete(p, 10)["choices"][0]["text"] for p in prompts}
errors = []


def client(i):
    p = prompts[i % len(prompts)]
    try:
        if i % 2:
            t = "".join(stream(p, 10)[0])
        else:
            t = complete(p, 10)["choices"][0]["text"]
        if t != refs[p]:
            errors.append(f"client {i}: {t!r} != {refs[p]!r}")
    except Exception as e:  # noqa: BLE001
        errors.append(f"client {i}: {e}")


threads = [threading.Thread(target=client, args=(i,)) for i in range(16)]
for t in threads:
    t.start()
for t in threads:
    t.join()
if errors:
    fail("; ".join(errors))

# A stop string: the text ends before it, finish_reason "stop".
if len(want) >= 4:
    stop = want[2:4]
    got = complete(prompt, n, stop=[stop])
    cut = want[: want.find(stop)]
    if got["choices"][0]["text"] != cut or got["choices"][0]["finish_reason"] != "stop":
        fail(f"stop {stop!r}: {got['choices'][0]}")

# A client that goes away while its stream is in flight: its request is aborted, its blocks
# freed. The client leaves right after sending. A tiny model can still decode its whole
# context before the server's first write finds the client gone; that stream rightly ends
# "finished", so the client tries again (up to 20 times) until one is caught in flight.
def ended(m):
    return sum(m.get(f'dtrain_requests_total{{state="{k}"}}', 0) for k in ("finished", "aborted", "rejected"))


before = metrics().get('dtrain_requests_total{state="aborted"}', 0)
aborted = False
for attempt in range(20):
    ended_before = ended(metrics())
    stream("t", context - 1, stop_after=0, seed=1 + attempt, top_k=0)
    for _ in range(200):  # until this attempt's request has ended
        m = metrics()
        if ended(m) > ended_before:
            break
        time.sleep(0.025)
    if m.get('dtrain_requests_total{state="aborted"}', 0) > before:
        aborted = True
        break
if not aborted or m['dtrain_kv_blocks{state="used"}'] != 0:
    fail(f"the disconnected stream was not aborted in 20 tries, or its blocks were not freed: {m}")

# n choices, best_of, log-probabilities, include_usage, logit_bias, penalties.
got = complete(prompt, n, n=3)
if [c["index"] for c in got["choices"]] != [0, 1, 2] or any(c["text"] != want for c in got["choices"]) \
        or got["usage"]["completion_tokens"] != 3 * n:
    fail(f"n=3 greedy: {got}")
got = complete(prompt, n, logprobs=2)
lp = got["choices"][0]["logprobs"]
if len(lp["tokens"]) != n or "".join(lp["tokens"]) != want or any(
        len(t) != 2 or abs(l - max(t.values())) > 1e-6 or l > 0 for l, t in zip(lp["token_logprobs"], lp["top_logprobs"])) \
        or lp["text_offset"] != [sum(len(x) for x in lp["tokens"][:i]) for i in range(n)]:
    fail(f"logprobs: {lp}")
sampled = complete(prompt, n, temperature=1, seed=7, n=4)["choices"]
best = complete(prompt, n, temperature=1, seed=7, n=1, best_of=4, logprobs=0)["choices"]
scores = [sum(complete(prompt, n, temperature=1, seed=7 + i, logprobs=0)["choices"][0]["logprobs"]["token_logprobs"])
          for i in range(4)]
if len(best) != 1 or best[0]["text"] != sampled[scores.index(max(scores))]["text"]:
    fail(f"best_of 4: {best} vs {sampled} scored {scores}")
got = complete(prompt, n, logit_bias={str(ord("z")): 100})
if got["choices"][0]["text"] != "z" * n:
    fail(f"logit_bias +100 on 'z': {got['choices'][0]['text']!r}")
got = complete(prompt, n, frequency_penalty=2, presence_penalty=2, repetition_penalty=1.5)
if got["choices"][0]["text"] == want or len(set(got["choices"][0]["text"])) < len(set(want)):
    fail(f"penalties changed nothing: {got['choices'][0]['text']!r} vs {want!r}")
got = complete(prompt, n, echo=True)
if got["choices"][0]["text"] != prompt + want:
    fail(f"echo: {got['choices'][0]['text']!r}")
texts, finish, done = stream(prompt, n, stream_options={"include_usage": True})
if "".join(texts) != want or not done or usages[-1:] != [{"prompt_tokens": len(prompt), "completion_tokens": n,
                                                           "total_tokens": len(prompt) + n}]:
    fail(f"include_usage stream: {texts} {usages}")

# Bad requests: OpenAI-style error bodies.
def expect_error(status_want, body=None, raw=None, code=None, param=None):
    status, text = request("POST", "/v1/completions", body, raw)
    try:
        err = json.loads(text)["error"]
    except Exception:  # noqa: BLE001
        fail(f"{body or raw!r}: not an error object: {text}")
    if status != status_want or not err.get("message") or err.get("type") != "invalid_request_error":
        fail(f"{body or raw!r}: HTTP {status} {text}")
    if code and err.get("code") != code or param and err.get("param") != param:
        fail(f"{body or raw!r}: code/param {err}")


expect_error(400, raw='{"model": "dtrain", "prompt": ')
expect_error(400, raw="[1, 2]")
expect_error(400, {"model": "dtrain", "prompt": "x", "max_tokens": 2, "bogus_field": 1}, param="bogus_field")
expect_error(400, {"model": "dtrain", "prompt": "x" * context, "max_tokens": 1}, code="context_length_exceeded")
expect_error(400, {"model": "dtrain", "prompt": "x", "max_tokens": 0}, param="max_tokens")
expect_error(400, {"model": "dtrain", "prompt": "x", "max_tokens": -3}, param="max_tokens")
expect_error(400, {"model": "dtrain", "prompt": "x", "n": 17}, param="n")
expect_error(400, {"model": "dtrain", "prompt": "", "max_tokens": 2}, param="prompt")
expect_error(404, {"model": "gpt-4", "prompt": "x"}, code="model_not_found")
# Chat needs a tokenizer and a chat template: a checkpoint's tokens are bytes.
status, text = request("POST", "/v1/chat/completions", {"model": "dtrain", "messages": [{"role": "user", "content": "x"}]})
if status != 400 or "--model" not in json.loads(text)["error"]["message"]:
    fail(f"chat completions on a checkpoint: HTTP {status} {text}")
m = metrics()
if m['dtrain_kv_blocks{state="used"}'] != 0 or m['dtrain_requests{state="running"}'] != 0:
    fail(f"blocks or requests left over: {m}")

def serving_process():
    """The process to interrupt: the server itself, or under mpirun its world rank 0 (mpirun's
    own Ctrl-C ends the whole job at once, without a drain)."""
    if not launch:
        return proc.pid
    for pid in os.listdir("/proc"):
        try:
            cmd = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
            env = open(f"/proc/{pid}/environ", "rb").read().split(b"\0")
        except OSError:
            continue
        if b"serve" in cmd and port_file.encode() in cmd and b"OMPI_COMM_WORLD_RANK=0" in env:
            return int(pid)
    fail("no world rank 0 process found")


# Ctrl-C with a stream in flight: it finishes (the drain), then the server exits 0.
result = {}
t = threading.Thread(target=lambda: result.update(r=stream("the", 20)))
t.start()
time.sleep(0.05)
os.kill(serving_process(), signal.SIGINT)
t.join()
rc = proc.wait(timeout=60)
err = proc.stderr.read()
if rc != 0 or "draining" not in err:
    fail(f"exit {rc}: {err}")
texts, finish, done = result["r"]
if not done or finish != "length" or len("".join(texts)) != 20:
    fail(f"the stream in flight at Ctrl-C: {result}")
stats = json.load(open(f"stats{os.getpid()}.json"))
if stats["kv_cache"]["used_blocks"] != 0 or stats["requests"]["aborted"] < 1:
    fail(f"final stats: {stats}")
print(f"serve http ({tag}): ok; dropped stream caught on try {attempt + 1}; "
      f"{stats['requests']['finished']} finished, {stats['requests']['aborted']} aborted, "
      f"TTFT p50 {1e3 * stats['ttft_s']['p50']:.1f} ms")
