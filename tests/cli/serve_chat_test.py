"""dtrain serve --model over loopback, with the standard library's HTTP client (no openai
package, no torch): OpenAI chat completions through the model's tokenizer and chat template.

Checks, on the Qwen2 fixture (ChatML template): /v1/models lists the directory's name; a greedy
chat completion has OpenAI's shape, its usage counts the real tokenizer's tokens and its text is
`dtrain generate --model DIR --chat ...`'s; streamed, the pieces (after a first chunk with the
assistant's role, before a last one with the finish reason and a usage chunk) concatenate to
the same text; max_completion_tokens; a stop string cuts the text; a sampled chat that ends
at the model's end-of-sequence id ("stop", the id counted but not shown; seeded, `dtrain
generate`'s tokens); concurrent clients;
/v1/completions with a text prompt is `dtrain generate --model DIR --prompt ...`'s text; bad
requests get 400s naming the field. On the Llama fixture (Llama-2 template): roles that do not
alternate are a 400 carrying the template's message. On the GPT-2 fixture (no chat template):
a 400 naming --chat-template, and --chat-template chatml serves it. Ctrl-C exits 0.

usage: serve_chat_test.py DTRAIN FIXTURES [WORKDIR [extra serve flags...]]
  FIXTURES: tests/fixtures/hf (its models/<name> directories; a model directory without a
  tokenizer.json is staged with tokenizers/<family>/tokenizer.json and
  chat/<family>/tokenizer_config.json). Prints "serve chat (...): ok" on success.
"""
import http.client
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time

dtrain, fixtures = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
work = os.path.abspath(sys.argv[3]) if len(sys.argv) > 3 else tempfile.mkdtemp(prefix="serve_chat_")
extra = sys.argv[4:]  # such as --tp 2, for every server
tag = " ".join(extra) or "one rank"
os.makedirs(work, exist_ok=True)
os.chdir(work)

servers = []  # every server started, killed on failure


def fail(msg):
    print(f"FAIL (serve chat, {tag}): {msg}")
    for p in servers:
        if p.poll() is None:
            p.kill()  # a server left running would hold ctest's pipe open until its timeout
    sys.exit(1)


# tokenizer family, chat template family (None: the model has none) of each fixture model.
FAMILIES = {"qwen2": ("qwen2", "qwen2"), "llama": ("llama2", "llama2"), "gpt2": ("gpt2", None)}


def model_dir(name):
    """The fixture's directory, or when it has no tokenizer.json yet a staged copy (links to
    its files, the family's tokenizer.json and tokenizer_config.json)."""
    src = os.path.join(fixtures, "models", name)
    if os.path.exists(os.path.join(src, "tokenizer.json")):
        return src
    tok_family, chat_family = FAMILIES[name]
    dst = os.path.join(work, "staged", name)
    os.makedirs(dst, exist_ok=True)
    links = {f: os.path.join(src, f) for f in os.listdir(src)}
    links["tokenizer.json"] = os.path.join(fixtures, "tokenizers", tok_family, "tokenizer.json")
    if chat_family:
        links["tokenizer_config.json"] = os.path.join(fixtures, "chat", chat_family, "tokenizer_config.json")
    for f, target in links.items():
        if not os.path.exists(os.path.join(dst, f)):
            os.symlink(target, os.path.join(dst, f))
    print(f"note: {src} has no tokenizer.json; serving a staged copy {dst}")
    return dst


def has_chat_template(d):
    if os.path.exists(os.path.join(d, "chat_template.jinja")):
        return True
    try:
        return "chat_template" in json.load(open(os.path.join(d, "tokenizer_config.json")))
    except OSError:
        return False


class Server:
    def __init__(self, directory, *flags):
        self.port_file = os.path.join(work, f"port{os.getpid()}_{len(servers)}.txt")
        if os.path.exists(self.port_file):
            os.remove(self.port_file)
        self.proc = subprocess.Popen([dtrain, "serve", "--model", directory, "--port", "0", "--port-file",
                                      self.port_file, "--kv-blocks", "64", "--block-size", "8"] + extra + list(flags),
                                     stderr=subprocess.PIPE, text=True)
        servers.append(self.proc)
        for _ in range(600):
            if os.path.exists(self.port_file) and open(self.port_file).read().strip():
                break
            if self.proc.poll() is not None:
                fail(f"the server of {directory} exited: " + self.proc.stderr.read())
            time.sleep(0.05)
        else:
            fail(f"the server of {directory} did not start")
        self.port = int(open(self.port_file).read())

    def request(self, method, path, body=None, raw=None):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
        data = raw if raw is not None else (json.dumps(body) if body is not None else None)
        c.request(method, path, body=data, headers={"Content-Type": "application/json"})
        r = c.getresponse()
        text = r.read().decode("utf-8", "replace")
        c.close()
        return r.status, text

    def post_ok(self, path, body):
        status, text = self.request("POST", path, body)
        if status != 200:
            fail(f"{path} {body}: HTTP {status} {text}")
        return json.loads(text)

    def stream(self, path, body):
        """The chunks (parsed) of a streamed request, and whether [DONE] ended them."""
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
        c.request("POST", path, body=json.dumps(dict(body, stream=True)), headers={"Content-Type": "application/json"})
        r = c.getresponse()
        if r.status != 200 or not r.getheader("Content-Type", "").startswith("text/event-stream"):
            fail(f"stream {path}: HTTP {r.status} {r.getheader('Content-Type')} {r.read()!r}")
        chunks, done = [], False
        while True:
            line = r.fp.readline().decode("utf-8")
            if not line:
                break
            line = line.strip()
            if not line.startswith("data: "):
                continue
            payload = line[len("data: "):]
            if payload == "[DONE]":
                done = True
                break
            chunks.append(json.loads(payload))
        c.close()
        return chunks, done

    def expect_error(self, status_want, body=None, raw=None, code=None, param=None, words=(),
                     path="/v1/chat/completions"):
        status, text = self.request("POST", path, body, raw)
        try:
            err = json.loads(text)["error"]
        except Exception:  # noqa: BLE001
            fail(f"{body or raw!r}: not an error object: {text}")
        if status != status_want or not err.get("message") or err.get("type") != "invalid_request_error":
            fail(f"{body or raw!r}: HTTP {status} {text}")
        if code and err.get("code") != code or param and err.get("param") != param:
            fail(f"{body or raw!r}: code/param {err}")
        for w in words:
            if w not in err["message"]:
                fail(f"{body or raw!r}: the message lacks {w!r}: {err['message']}")
        return err

    def stop(self):
        """Ctrl-C: the server drains and exits 0."""
        os.kill(self.proc.pid, signal.SIGINT)
        rc = self.proc.wait(timeout=60)
        err = self.proc.stderr.read()
        if rc != 0:
            fail(f"exit {rc}: {err}")
        return err


def generate(directory, *args):
    """`dtrain generate --model DIR ...`'s JSON (greedy)."""
    out = os.path.join(work, "gen.json")
    r = subprocess.run([dtrain, "generate", "--model", directory, "--json", out] + list(args),
                       capture_output=True, text=True)
    if r.returncode != 0:
        fail(f"dtrain generate {args}: {r.stderr}")
    return json.load(open(out))


help_text = subprocess.run([dtrain, "generate", "--help"], capture_output=True, text=True).stdout
generate_has_model = "--model" in help_text and "--chat" in help_text
if not generate_has_model:
    print("note: dtrain generate has no --model/--chat here; its comparisons are skipped")

# ---- Qwen2 (ChatML) --------------------------------------------------------------------
qwen = model_dir("qwen2")
srv = Server(qwen)
status, text = srv.request("GET", "/v1/models")
if status != 200 or json.loads(text)["data"][0]["id"] != "qwen2":
    fail(f"/v1/models: {status} {text}")
NAME = "qwen2"

messages = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Hello! How are you today?"}]
n = 8
body = dict(model=NAME, messages=messages, max_tokens=n, temperature=0)
got = srv.post_ok("/v1/chat/completions", body)
choice = got["choices"][0] if len(got.get("choices", [])) == 1 else fail(f"choices: {got}")
if (not got["id"].startswith("chatcmpl-") or got["object"] != "chat.completion" or got["model"] != NAME
        or not isinstance(got["created"], int) or choice["index"] != 0
        or choice["message"]["role"] != "assistant" or not isinstance(choice["message"]["content"], str)
        or choice["finish_reason"] not in ("stop", "length")):
    fail(f"chat completion shape: {got}")
content, usage = choice["message"]["content"], got["usage"]
if (usage["total_tokens"] != usage["prompt_tokens"] + usage["completion_tokens"]
        or not 1 <= usage["completion_tokens"] <= n
        or (choice["finish_reason"] == "length") != (usage["completion_tokens"] == n)):
    fail(f"usage: {got}")

# The same conversation through `dtrain generate --chat`: the same tokens and text.
if generate_has_model:
    ref = generate(qwen, "--chat", json.dumps(messages), "--max-new-tokens", str(n))
    if usage["prompt_tokens"] != len(ref["prompt_tokens"]):
        fail(f"prompt_tokens {usage['prompt_tokens']} != the rendered template's {len(ref['prompt_tokens'])} tokens")
    if content != ref["text"]:
        fail(f"chat content {content!r} != dtrain generate --chat's {ref['text']!r}")
    if "tokens" in ref and usage["completion_tokens"] != len(ref["tokens"]):
        fail(f"completion_tokens {usage['completion_tokens']} != dtrain generate's {len(ref['tokens'])}")

# max_completion_tokens is max_tokens.
got2 = srv.post_ok("/v1/chat/completions", dict(model=NAME, messages=messages, max_completion_tokens=n, temperature=0))
if got2["choices"][0]["message"]["content"] != content or got2["usage"] != usage:
    fail(f"max_completion_tokens: {got2} vs {got}")

# Streamed: a role chunk, pieces, a finish chunk, a usage chunk, [DONE].
chunks, done = srv.stream("/v1/chat/completions", dict(body, stream_options={"include_usage": True}))
if not done or len(chunks) < 3:
    fail(f"stream: {chunks} {done}")
for ch in chunks:
    if ch["object"] != "chat.completion.chunk" or ch["id"] != chunks[0]["id"] or not ch["id"].startswith("chatcmpl-"):
        fail(f"chunk shape: {ch}")
if chunks[0]["choices"][0]["delta"] != {"role": "assistant", "content": ""}:
    fail(f"first chunk: {chunks[0]}")
last, usage_chunk = chunks[-2], chunks[-1]
if last["choices"][0]["delta"] != {} or last["choices"][0]["finish_reason"] != choice["finish_reason"]:
    fail(f"finish chunk: {last}")
if usage_chunk["choices"] != [] or usage_chunk["usage"] != usage:
    fail(f"usage chunk {usage_chunk} (the whole request's usage: {usage})")
pieces = []
for ch in chunks[1:-2]:
    d = ch["choices"][0]
    if set(d["delta"]) != {"content"} or d["finish_reason"] is not None or ch.get("usage", "absent") is not None:
        fail(f"content chunk: {ch}")
    pieces.append(d["delta"]["content"])
if "".join(pieces) != content:
    fail(f"streamed pieces {pieces} != the whole completion's {content!r}")
# Without include_usage: no usage chunk, no "usage" field.
chunks, done = srv.stream("/v1/chat/completions", body)
if not done or chunks[-1]["choices"][0]["finish_reason"] != choice["finish_reason"] or any("usage" in c for c in chunks):
    fail(f"stream without usage: {chunks}")
if "".join(c["choices"][0]["delta"].get("content", "") for c in chunks) != content:
    fail(f"stream without usage: {chunks}")

# A stop string: the text ends before it, finish_reason "stop".
if len(content) >= 3:
    stop = content[1:3]
    got = srv.post_ok("/v1/chat/completions", dict(body, stop=[stop]))
    want = content[: content.find(stop)]
    if got["choices"][0]["message"]["content"] != want or got["choices"][0]["finish_reason"] != "stop":
        fail(f"stop {stop!r}: {got['choices'][0]} (want {want!r})")
    if not 1 <= got["usage"]["completion_tokens"] <= usage["completion_tokens"]:
        fail(f"stop {stop!r}: usage {got['usage']}")
    chunks, done = srv.stream("/v1/chat/completions", dict(body, stop=stop))
    if "".join(c["choices"][0]["delta"].get("content", "") for c in chunks) != want:
        fail(f"streamed stop {stop!r}: {chunks}")
else:
    fail(f"the greedy completion {content!r} is too short to test a stop string")

# The model's end-of-sequence id ends a sampled chat: finish_reason "stop", the id counted in
# the usage but not in the text; seeded sampling gives `dtrain generate`'s tokens. (Sampled
# seeds until one ends before max_tokens: the fixture's weights are random.)
hi = [{"role": "user", "content": "hi"}]
for seed in range(100):
    got = srv.post_ok("/v1/chat/completions", dict(model=NAME, messages=hi, temperature=1.5, seed=seed, max_tokens=60))
    if got["choices"][0]["finish_reason"] == "stop":
        break
else:
    fail("no sampled chat of 100 seeds ended at the end-of-sequence id")
if got["usage"]["completion_tokens"] >= 60 or "<|" in got["choices"][0]["message"]["content"]:
    fail(f"ended at the end-of-sequence id: {got}")
if generate_has_model:
    ref = generate(qwen, "--chat", json.dumps(hi), "--max-new-tokens", "60", "--temperature", "1.5", "--seed", str(seed))
    if got["choices"][0]["message"]["content"] != ref["text"] or ("tokens" in ref and
                                                               got["usage"]["completion_tokens"] != len(ref["tokens"])):
        fail(f"seed {seed}: {got} != dtrain generate's {ref['text']!r} ({len(ref.get('tokens', []))} tokens)")
chunks, done = srv.stream("/v1/chat/completions", dict(model=NAME, messages=hi, temperature=1.5, seed=seed, max_tokens=60))
if (not done or chunks[-1]["choices"][0]["finish_reason"] != "stop"
        or "".join(c["choices"][0]["delta"].get("content", "") for c in chunks) != got["choices"][0]["message"]["content"]):
    fail(f"streamed seed {seed}: {chunks}")

# Roles that ChatML does not check: two user turns are rendered.
srv.post_ok("/v1/chat/completions", dict(model=NAME, messages=[{"role": "user", "content": "a"},
                                                                {"role": "user", "content": "b"}], max_tokens=2))
# Content as text parts.
parts = srv.post_ok("/v1/chat/completions", dict(body, messages=[messages[0], {"role": "user", "content": [
    {"type": "text", "text": messages[1]["content"]}]}]))
if parts["choices"][0]["message"]["content"] != content:
    fail(f"content parts: {parts}")
# No max_tokens: as many as fit.
got = srv.post_ok("/v1/chat/completions", dict(model=NAME, messages=messages, temperature=0))
if got["usage"]["completion_tokens"] < n and got["choices"][0]["finish_reason"] != "stop":
    fail(f"default max_tokens: {got}")

# Concurrent clients, streamed and whole: each gets its conversation's greedy text.
convs = [[{"role": "user", "content": t}] for t in ("hi", "What is 2+2?", "Tell me a story.", "ok")]
refs = [srv.post_ok("/v1/chat/completions", dict(model=NAME, messages=m, max_tokens=6, temperature=0))
        ["choices"][0]["message"]["content"] for m in convs]
errors = []


def client(i):
    m = convs[i % len(convs)]
    try:
        b = dict(model=NAME, messages=m, max_tokens=6, temperature=0)
        if i % 2:
            cs, _ = srv.stream("/v1/chat/completions", b)
            t = "".join(c["choices"][0]["delta"].get("content", "") for c in cs)
        else:
            t = srv.post_ok("/v1/chat/completions", b)["choices"][0]["message"]["content"]
        if t != refs[i % len(convs)]:
            errors.append(f"client {i}: {t!r} != {refs[i % len(convs)]!r}")
    except Exception as e:  # noqa: BLE001
        errors.append(f"client {i}: {e}")


threads = [threading.Thread(target=client, args=(i,)) for i in range(8)]
for t in threads:
    t.start()
for t in threads:
    t.join()
if errors:
    fail("; ".join(errors))

# /v1/completions with a text prompt: the tokenizer's tokens (add_special_tokens), the
# detokenized text, `dtrain generate --model --prompt`'s.
prompt = "The quick brown fox"
got = srv.post_ok("/v1/completions", dict(model=NAME, prompt=prompt, max_tokens=n, temperature=0))
text = got["choices"][0]["text"]
if got["object"] != "text_completion" or not got["id"].startswith("cmpl-"):
    fail(f"completion shape: {got}")
if generate_has_model:
    ref = generate(qwen, "--prompt", prompt, "--max-new-tokens", str(n))
    if text != ref["text"] or got["usage"]["prompt_tokens"] != len(ref["prompt_tokens"]):
        fail(f"completion {got} != dtrain generate --prompt's {ref['text']!r} ({len(ref['prompt_tokens'])} prompt tokens)")
chunks, done = srv.stream("/v1/completions", dict(model=NAME, prompt=prompt, max_tokens=n, temperature=0))
if not done or "".join(c["choices"][0]["text"] for c in chunks) != text:
    fail(f"streamed completion: {chunks}")

# Bad requests.
srv.expect_error(400, raw='{"model": "qwen2", "messages": ')
srv.expect_error(400, {"model": NAME}, param="messages")
srv.expect_error(400, {"model": NAME, "messages": "hi"}, param="messages")
srv.expect_error(400, {"model": NAME, "messages": []}, param="messages")
srv.expect_error(400, {"model": NAME, "messages": ["hi"]}, param="messages[0]")
srv.expect_error(400, {"model": NAME, "messages": [{"role": "user"}]}, param="messages[0].content")
srv.expect_error(400, {"model": NAME, "messages": [{"role": "user", "content": 3}]}, param="messages[0].content")
srv.expect_error(400, {"model": NAME, "messages": [{"role": "robot", "content": "x"}]}, param="messages[0].role")
srv.expect_error(400, {"model": NAME, "messages": [{"content": "x"}]}, param="messages[0].role")
srv.expect_error(400, {"model": NAME, "messages": [{"role": "user", "content": "x", "tool_calls": []}]},
                 param="messages[0].tool_calls")
srv.expect_error(400, {"model": NAME, "messages": messages, "max_tokens": 0}, param="max_tokens")
srv.expect_error(400, {"model": NAME, "messages": messages, "n": 17}, param="n")
srv.expect_error(400, {"model": NAME, "messages": messages, "top_logprobs": 2}, param="top_logprobs")
# n choices and log-probabilities: greedy, every choice is the same text, each token the most
# likely one (its log-probability is the top alternative's), all at most 0.
got = srv.post_ok("/v1/chat/completions", dict(model=NAME, messages=messages, max_tokens=5, temperature=0, n=2,
                                               logprobs=True, top_logprobs=3))
cs = got["choices"]
if [c["index"] for c in cs] != [0, 1] or cs[0]["message"]["content"] != cs[1]["message"]["content"]:
    fail(f"chat n=2 greedy: {cs}")
for c in cs:
    lp = c["logprobs"]["content"]
    if not lp or any(len(e["top_logprobs"]) != 3 or abs(e["logprob"] - e["top_logprobs"][0]["logprob"]) > 1e-6
                     or e["logprob"] > 0 or bytes(e["bytes"]).decode("utf-8", "replace") != e["token"] for e in lp):
        fail(f"chat logprobs: {c['logprobs']}")
    if "".join(e["token"] for e in lp) != c["message"]["content"] and c["finish_reason"] == "length":
        fail(f"chat logprobs tokens do not spell the content: {lp} {c['message']['content']!r}")
srv.expect_error(400, {"model": NAME, "messages": messages, "bogus": 1}, param="bogus")
srv.expect_error(400, {"model": NAME, "messages": messages, "stream_options": {"include_usage": True}},
                 param="stream_options")
srv.expect_error(400, {"model": NAME, "messages": [{"role": "user", "content": "word " * 400}], "max_tokens": 4},
                 code="context_length_exceeded")
srv.expect_error(404, {"model": "gpt-4", "messages": messages}, code="model_not_found")
srv.expect_error(400, {"model": NAME, "prompt": "word " * 400, "max_tokens": 4}, code="context_length_exceeded",
                 path="/v1/completions")
srv.stop()

# ---- Llama (Llama-2 template: roles must alternate) --------------------------------------
llama = model_dir("llama")
srv = Server(llama, "--model-name", "tiny-llama")
ok = srv.post_ok("/v1/chat/completions", dict(model="tiny-llama", max_tokens=4, temperature=0,
                                               messages=[{"role": "user", "content": "hi"}]))
if generate_has_model:
    ref = generate(llama, "--chat", json.dumps([{"role": "user", "content": "hi"}]), "--max-new-tokens", "4")
    if ok["choices"][0]["message"]["content"] != ref["text"] or ok["usage"]["prompt_tokens"] != len(ref["prompt_tokens"]):
        fail(f"llama chat {ok} != dtrain generate --chat's {ref['text']!r} ({len(ref['prompt_tokens'])} prompt tokens)")
srv.expect_error(400, {"model": "tiny-llama", "messages": [{"role": "user", "content": "a"},
                                                           {"role": "user", "content": "b"}]},
                 param="messages", words=("Conversation roles must alternate",))
srv.expect_error(400, {"model": "tiny-llama", "messages": [{"role": "assistant", "content": "a"}]},
                 words=("Conversation roles must alternate",))
srv.stop()

# ---- GPT-2 (no chat template) ------------------------------------------------------------
gpt2 = model_dir("gpt2")
if has_chat_template(gpt2):
    print(f"note: {gpt2} has a chat template; the no-template check is skipped")
else:
    srv = Server(gpt2)
    srv.expect_error(400, {"model": "gpt2", "messages": messages}, words=("--chat-template",))
    srv.post_ok("/v1/completions", dict(model="gpt2", prompt="hello", max_tokens=3, temperature=0))
    srv.stop()
    srv = Server(gpt2, "--chat-template", "chatml")
    srv.post_ok("/v1/chat/completions", dict(model="gpt2", messages=[{"role": "user", "content": "hi"}], max_tokens=3,
                                             temperature=0))
    srv.stop()

# ---- Flags ------------------------------------------------------------------------------
for args, words in ((["--model", qwen, "--checkpoint", "x/ckpt"], ("--checkpoint", "--model")),
                    (["--checkpoint", "x/ckpt", "--chat-template", "chatml"], ("--chat-template", "--model"))):
    r = subprocess.run([dtrain, "serve", "--port", "0"] + args, capture_output=True, text=True, timeout=60)
    if r.returncode != 2 or not all(w in r.stderr for w in words):
        fail(f"dtrain serve {args}: exit {r.returncode}: {r.stderr}")

print(f"serve chat ({tag}): ok; qwen2 greedy chat {content!r} ({usage['prompt_tokens']} prompt tokens, "
      f"{usage['completion_tokens']} completion tokens, {choice['finish_reason']})")
