"""The `openai` backend against a real OpenAI-compatible server on 127.0.0.1 (llama.cpp)."""

import json
import threading
import time

import pytest

from generate.backends import ChatRequest, SamplingParams, load_model
from generate.common.errors import UsageError
from generate.runner import RunConfig, Runner

pytestmark = [pytest.mark.server, pytest.mark.slow]


def model_for(server, **kw):
    return load_model("openai:smollm2", base_url=server.base_url, api_key=server.api_key, **kw)


def test_generation_through_the_server(tmp_path, llama_server):
    cfg = RunConfig(framework="review", model="openai:smollm2", base_url=llama_server.base_url,
                    api_key=llama_server.api_key, limit=1, rounds=2, max_new_tokens=12, out=str(tmp_path))
    path = Runner(cfg).run()
    stories = [json.loads(line) for line in path.read_text().splitlines()]
    assert len(stories) == 3 and all(s["text"] for s in stories)
    assert all(s["usage"]["prompt_tokens"] > 0 for s in stories)
    manifest = (tmp_path / "manifest.json").read_text()
    assert llama_server.api_key not in manifest  # secrets never reach manifests


def test_logprobs_come_back(llama_server):
    model = model_for(llama_server)
    req = ChatRequest([{"role": "user", "content": "Say a number."}], SamplingParams(4, 0.0, 1.0), logprobs=5)
    (out,) = model.generate([req])
    assert out.logprobs and len(out.logprobs[0].top) == 5
    assert all(lp.logprob <= 0 for lp in out.logprobs)


def test_wrong_key_fails_at_once_with_a_clear_error(llama_server):
    model = load_model("openai:smollm2", base_url=llama_server.base_url, api_key="wrong")
    started = time.monotonic()
    with pytest.raises(UsageError, match="HTTP 401"):
        model.generate([ChatRequest([{"role": "user", "content": "hi"}], SamplingParams(4))])
    assert time.monotonic() - started < 10  # no retries on 401


def test_server_restarted_mid_run(llama_server, caplog):
    """Calls in flight when the server dies are retried with backoff and succeed after restart."""
    model = model_for(llama_server, concurrency=2, timeout=30)
    model.policy.backoff = 0.5
    requests = [ChatRequest([{"role": "user", "content": f"Name a planet, #{i}."}], SamplingParams(16), seed=i)
                for i in range(8)]
    done = []

    def restart():
        while not done:
            time.sleep(0.05)
        llama_server.stop()
        time.sleep(1.0)
        llama_server.start(wait=False)

    thread = threading.Thread(target=restart)
    thread.start()
    outs = model.generate(requests, on_done=lambda idx, comps: done.extend(idx))
    thread.join()
    llama_server.wait_ready()
    assert len(outs) == 8 and all(o.text for o in outs)
    assert any("retry" in r.getMessage() for r in caplog.records), "the restart was never noticed"
