"""Every option of every registered reward declares what it admits, and a recipe's value outside it
(out of range, of the wrong type, not finite, a path that does not exist, an unknown name) is
refused when the recipe is bound, in one line naming the reward and the option, before a model
loads (`rewards.registry`). The table `BAD` holds a refused value for every option of every reward,
so a new reward (or option) cannot be added without one."""

from __future__ import annotations

import math

import pytest

from generate.common.errors import UsageError
from rewards import REWARDS, build_rewards, check_recipe
from rewards.registry import option_defaults, option_names, reward

# (reward, option) -> a value it refuses, and a fragment of the error line.
BAD = {
    ("judge", "model"): ("gpt-9", "option model: unknown model 'gpt-9'"),
    ("judge", "mode"): ("vote", "option mode: 'vote' is not one of: sample, logprob"),
    ("judge", "samples"): (0, "option samples must be >= 1, got 0"),
    ("judge", "rubric"): ("no/such/rubric.yaml", "option rubric: config file not found: no/such/rubric.yaml"),
    ("judge", "timeout"): (-1, "option timeout must be > 0, got -1"),
    ("judge", "batch_size"): (2.5, "option batch_size must be a whole number, got 2.5"),
    ("judge", "base_url"): ("127.0.0.1:8001/v1", "option base_url: '127.0.0.1:8001/v1' is not an http(s):// URL"),
    ("judge", "concurrency"): (0, "option concurrency must be >= 1, got 0"),
    ("judge", "retries"): (-1, "option retries must be >= 0, got -1"),
    ("kl", "reference_dir"): ("no/such/corpus", "option reference_dir: no such directory: no/such/corpus"),
    ("kl", "embedder"): ("./no/such/encoder", "option embedder: embedder './no/such/encoder' is neither"),
    ("kl", "max_chunks"): (0, "option max_chunks must be >= 1, got 0"),
    ("kl", "alpha"): (math.nan, "option alpha must be a finite number, got nan"),
    ("kl", "seed"): ("7", "option seed must be a whole number, got '7'"),
    ("novelty_cos", "reference_dir"): (3, "option reference_dir must be text, got 3 (quote it to make it text)"),
    ("novelty_cos", "embedder"): ("", "option embedder: embedder '' is neither"),
    ("novelty_cos", "max_chunks"): (-5, "option max_chunks must be >= 1, got -5"),
    ("novelty_cos", "seed"): (1.5, "option seed must be a whole number, got 1.5"),
    ("volume_gain", "reference_dir"): ("no/such/corpus", "option reference_dir: no such directory"),
    ("volume_gain", "embedder"): (None, "option embedder must be text, got None"),
    ("volume_gain", "max_chunks"): (True, "option max_chunks must be a whole number, got True"),
    ("volume_gain", "seed"): (None, "option seed must be a whole number, got None"),
    ("group_diversity", "embedder"): ("a/b/c", "option embedder: embedder 'a/b/c' is neither"),
    ("group_diversity", "chunk_size"): (0, "option chunk_size must be >= 1, got 0"),
    ("length", "target_words"): (0, "option target_words must be >= 1, got 0"),
    ("length", "tolerance"): (1.0, "option tolerance must be in [0, 1), got 1.0"),
    ("surprisal", "model"): ("llama", "option model: unknown model 'llama'"),
    ("surprisal", "batch_size"): (0, "option batch_size must be >= 1, got 0"),
    ("reward_model", "model_dir"): ("no/such/rm", "option model_dir: no reward model in no/such/rm"),
    ("reward_model", "batch_size"): (-1, "option batch_size must be >= 1, got -1"),
    ("reward_model", "max_length"): (0, "option max_length must be >= 1, got 0"),
    ("reward_model", "device"): ("gpu", "option device: device 'gpu' is not auto or a torch device"),
    ("reward_model", "dtype"): ("int8", "option dtype: 'int8' is not one of: float32, bfloat16, float16"),
    ("principle_judge", "principles"): ("no/such.yaml", "option principles: config file not found: no/such.yaml"),
    ("principle_judge", "model"): ("gpt-9", "option model: unknown model 'gpt-9'"),
    ("principle_judge", "mode"): ("binary", "option mode: 'binary' is not one of: sample, logprob"),
    ("principle_judge", "orders"): (3, "option orders must be in [1, 2], got 3"),
    ("principle_judge", "templates"): ("no/such.yaml", "option templates: config file not found"),
    ("principle_judge", "timeout"): (math.inf, "option timeout must be a finite number, got inf"),
    ("principle_judge", "batch_size"): (0, "option batch_size must be >= 1, got 0"),
    ("principle_judge", "base_url"): ("ftp://host/v1", "is not an http(s):// URL"),
    ("principle_judge", "concurrency"): (-2, "option concurrency must be >= 1, got -2"),
    ("principle_judge", "retries"): ("2", "option retries must be a whole number, got '2'"),
    ("principle_judge", "seed"): (math.nan, "option seed must be a whole number, got nan"),
}
PATHS = {("reward_model", "model_dir")}  # whose default names a path that exists only once made


def test_every_option_of_every_reward_declares_what_it_admits():
    """Registration refuses an option without a declaration (`test_registering_...` below); this
    reads the registry itself, and holds the table above to a refused value for every option."""
    for name, entry in REWARDS.items():
        assert set(entry.options) == set(option_names(entry.func)), name
        for option, spec in entry.options.items():
            assert spec.range is not None or spec.check is not None, (name, option)
    missing = sorted({(n, o) for n, e in REWARDS.items() for o in e.options} - set(BAD))
    assert not missing, f"options without a refused value in BAD: {missing}"


def test_registering_a_reward_with_an_undeclared_option_fails_at_import():
    def novel(prompts, completions, *, k: int = 3, **columns):
        return [0.0] * len(completions)

    with pytest.raises(ValueError, match="undeclared: k"):
        reward("novel")(novel)
    with pytest.raises(ValueError, match="declares neither a range nor a check"):
        reward("novel", options={"k": {"help": "how many"}})(novel)
    with pytest.raises(ValueError, match="declared but no such option: kk"):
        reward("novel", options={"k": {"range": None, "check": None}, "kk": {"check": print}})(novel)

    def listy(prompts, completions, *, names: list = (), **columns):
        return [0.0] * len(completions)

    with pytest.raises(ValueError, match="option names is annotated"):
        reward("listy", options={"names": {"check": print}})(listy)
    assert "novel" not in REWARDS and "listy" not in REWARDS


@pytest.mark.parametrize(("name", "option"), sorted(BAD))
def test_a_value_the_option_does_not_admit_is_refused_when_bound(name, option, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # relative paths in the table exist nowhere
    value, message = BAD[(name, option)]
    with pytest.raises(UsageError) as refused:
        check_recipe([name], {name: {option: value}})
    assert str(refused.value).startswith(f"reward {name!r}: ") and message in str(refused.value)
    assert "\n" not in str(refused.value)
    with pytest.raises(UsageError, match=f"reward {name!r}"):  # building binds through the same check
        build_rewards([name], {name: {option: value}})


def test_every_default_is_admitted():
    for name, entry in REWARDS.items():
        for option, default in option_defaults(entry.func).items():
            if (name, option) not in PATHS:
                assert entry.options[option].refusal(default) is None, (name, option, default)


@pytest.mark.parametrize(("options", "message"), [
    ({"mode": "sample", "orders": 2}, "orders must be 1 in sample mode, got 2"),
])
def test_options_refused_together(options, message):
    with pytest.raises(UsageError, match=f"reward 'principle_judge': {message}"):
        check_recipe(["principle_judge"], {"principle_judge": options})
    check_recipe(["principle_judge"], {"principle_judge": {"mode": "sample", "orders": 1}})
    check_recipe(["principle_judge"], {"principle_judge": {"mode": "logprob", "orders": 2}})


def test_admitted_values_pass(tmp_path):
    (tmp_path / "corpus").mkdir()
    check_recipe(["judge", "kl", "length"], {
        "judge": {"model": "openai:Qwen/Qwen2.5-7B-Instruct", "mode": "sample", "samples": 3, "timeout": 600,
                  "base_url": "http://127.0.0.1:8001/v1", "retries": 0},
        "kl": {"reference_dir": str(tmp_path / "corpus"), "embedder": "sentence-transformers/all-MiniLM-L12-v2",
               "max_chunks": 2000, "alpha": 0.5, "seed": -3},
        "length": {"target_words": 30, "tolerance": 0}})
    check_recipe(["group_diversity"], {"group_diversity": {"embedder": str(tmp_path / "corpus")}})


def test_the_gate_judge_options_are_checked_too():
    with pytest.raises(UsageError, match="reward 'judge': option timeout must be > 0"):
        check_recipe(["novelty_cos"], {"judge": {"timeout": 0}}, gate="judge")
    with pytest.raises(UsageError, match="reward 'judge': option mode"):  # the gate's judge, with its defaults
        check_recipe(["novelty_cos", "judge"], {"judge": {"mode": "x"}}, gate="judge")
