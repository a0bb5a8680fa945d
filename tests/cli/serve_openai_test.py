"""dtrain serve through the official `openai` Python client (PyPI), as a user's program would
call it: completions whole and streamed with n, logprobs, echo, penalties, logit_bias,
best_of and include_usage; models.list and models.retrieve; an error status raised as the
client's exception; a stream cut off by the drain deadline raised too. Skips (exit 0,
"skipped") when the `openai` package is not installed; CI does not need it.

usage: serve_openai_test.py DTRAIN CHECKPOINT CONTEXT   (PYTHON with openai: run it with that)
"""
import os
import signal
import subprocess
import sys
import time

try:
    import openai
except ImportError:
    print("serve openai: skipped (pip install openai to run it)")
    sys.exit(0)

dtrain, ckpt, context = sys.argv[1], sys.argv[2], int(sys.argv[3])
port_file = f"oport{os.getpid()}.txt"
if os.path.exists(port_file):
    os.remove(port_file)
proc = subprocess.Popen([dtrain, "serve", "--checkpoint", ckpt, "--port", "0", "--port-file", port_file,
                         "--kv-blocks", "64", "--block-size", "8"], stderr=subprocess.PIPE, text=True)


def fail(msg):
    print(f"FAIL (serve openai): {msg}")
    if proc.poll() is None:
        proc.kill()
    sys.exit(1)


for _ in range(600):
    if os.path.exists(port_file) and open(port_file).read().strip():
        break
    if proc.poll() is not None:
        fail("the server exited: " + proc.stderr.read())
    time.sleep(0.05)
client = openai.OpenAI(base_url=f"http://127.0.0.1:{int(open(port_file).read())}/v1", api_key="none", max_retries=0)

if [m.id for m in client.models.list().data] != ["dtrain"] or client.models.retrieve("dtrain").id != "dtrain":
    fail("models")
want = client.completions.create(model="dtrain", prompt="the quick", max_tokens=8, temperature=0).choices[0].text
r = client.completions.create(model="dtrain", prompt="the quick", max_tokens=8, temperature=0, n=2, logprobs=2)
if [c.text for c in r.choices] != [want, want] or len(r.choices[0].logprobs.token_logprobs) != 8 \
        or r.usage.completion_tokens != 16:
    fail(f"n=2 logprobs: {r}")
r = client.completions.create(model="dtrain", prompt="the quick", max_tokens=8, temperature=0, echo=True,
                              presence_penalty=0.5, frequency_penalty=0.5, logit_bias={str(ord("z")): 100})
if r.choices[0].text != "the quick" + "z" * 8:
    fail(f"echo + logit_bias: {r.choices[0].text!r}")
r = client.completions.create(model="dtrain", prompt="the quick", max_tokens=8, temperature=1, seed=3, best_of=3)
if len(r.choices) != 1 or r.usage.completion_tokens != 24:
    fail(f"best_of 3: {r}")
chunks = list(client.completions.create(model="dtrain", prompt="the quick", max_tokens=8, temperature=0, stream=True,
                                        stream_options={"include_usage": True}))
text = "".join(c.choices[0].text for c in chunks if c.choices)
if text != want or chunks[-1].usage.completion_tokens != 8:
    fail(f"stream: {text!r} {chunks[-1]}")
try:
    client.completions.create(model="dtrain", prompt="x", max_tokens=2, top_p=0)
    fail("top_p 0 was accepted")
except openai.BadRequestError as e:
    if "top_p" not in str(e):
        fail(f"top_p error: {e}")
try:
    client.completions.create(model="other", prompt="x", max_tokens=2)
    fail("another model was accepted")
except openai.NotFoundError:
    pass
proc.send_signal(signal.SIGINT)
if proc.wait(timeout=30) != 0:
    fail("exit status")
print(f"serve openai ({openai.__version__}): ok")
