"""The optimisation loop with a scripted model: outputs per iteration, the held-out split kept out
of every optimising call, the --no-reflect ablation, splits, and resume after a kill."""

from __future__ import annotations

import json
import shutil

import pytest
import yaml

from generate.common.errors import UsageError
from generate.common.jsonl import read_jsonl
from rewards.principles.data import load_labelled, split_examples
from rewards.principles.optimize import Optimiser, OptimizeConfig
from rewards.principles.protocols import Example
from tests.principles.fakes import RoleBackend, _fenced_text, model_of, says_good


def write_labelled(path, groups=6, split=False):
    rows = []
    for g in range(groups):
        extra = {"split": "heldout" if g % 3 == 0 else "optimisation"} if split else {}
        rows.append({"id": f"g{g}", "prompt": f"Task {g}.", "response": f"A careful tale number {g}.", "label": 1,
                     "work": f"w{g}", **extra})
        rows.append({"id": f"g{g}/loop", "prompt": f"Task {g}.", "response": f"LOOP tale {g} LOOP tale {g}.",
                     "label": 0, "work": f"w{g}", **extra})
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def learning_backend():
    """A Detector that catches DAMAGED only once a principle mentions damage, and LOOP only once one
    mentions loops: the feedback rewrite teaches the first, the Reflector the second."""
    def detector(r):
        text, prompt = _fenced_text(r), r.messages[0]["content"].split("<<<STORY-")[0].lower()
        bad = ("DAMAGED" in text and "damage" in prompt) or ("LOOP" in text and "loops" in prompt)
        return says_good(not bad, r, backend.templates)

    backend = RoleBackend({
        "detector": detector,
        "feedback": lambda r: "- Reject text with damage of any kind.\n- Stay on the task.",
        "reflect": lambda r: "- Reject text with damage of any kind.\n- Reject loops of repeated words.\n"
                             "- Stay on the task."})
    return backend


def config(tmp_path, data, **kw):
    return OptimizeConfig(labelled=str(data), out=str(tmp_path / "opt"), model="role-fake", iterations=2,
                          attacks=2, heldout_fraction=0.34, **kw)


def test_iterations_write_versioned_outputs_and_improve(tmp_path):
    data = write_labelled(tmp_path / "data.jsonl")
    backend = learning_backend()
    result = Optimiser(config(tmp_path, data), model_of(backend)).run()
    out = tmp_path / "opt"
    assert result == out / "principles.yaml"
    rows = list(read_jsonl(out / "metrics.jsonl"))
    assert [r["iteration"] for r in rows] == [0, 1, 2]
    assert [r["accuracy"] for r in rows] == [0.5, 1.0, 1.0]  # the loops are learnt from the Reflector
    first = yaml.safe_load((out / "iteration-01.yaml").read_text())
    assert first["adversarial"]["fooled"] == 2 and first["reflection"]["errors"] == 4
    assert [u["role"] for u in first["updates"]] == ["feedback", "reflector"]
    second = yaml.safe_load((out / "iteration-02.yaml").read_text())
    assert second["adversarial"]["caught"] == 2 and [u["role"] for u in second["updates"]] == ["generator"]
    assert second["strategy"] != first["strategy"]  # caught attacks pushed the strategy
    final = yaml.safe_load(result.read_text())
    assert final["principles"] == second["principles"] and final["iteration"] == 2
    assert final["detector"] == {"model": "role-fake", "verdict": "logprob", "orders": 2}
    assert (out / "metrics.png").stat().st_size > 0 and (out / "manifest.json").is_file()


def test_the_heldout_split_never_reaches_an_optimising_call(tmp_path):
    data = write_labelled(tmp_path / "data.jsonl")
    backend = learning_backend()
    opt = Optimiser(config(tmp_path, data), model_of(backend))
    opt.run()
    held = {e.response for e in opt.held}
    optimising = [r.messages[0]["content"] for role, r in backend.seen if role != "detector"]
    assert held and optimising and not any(h in text for h in held for text in optimising)
    assert {e.group for e in opt.held}.isdisjoint({e.group for e in opt.opt})


def test_no_reflect_is_the_ablation(tmp_path):
    data = write_labelled(tmp_path / "data.jsonl")
    backend = learning_backend()
    Optimiser(config(tmp_path, data, reflect=False), model_of(backend)).run()
    assert not {"diagnose", "reflect"} & set(backend.roles())
    rows = list(read_jsonl(tmp_path / "opt" / "metrics.jsonl"))
    assert [r["accuracy"] for r in rows] == [0.5, 0.5, 0.5] and all(not r["reflect"] for r in rows)
    detected = [r for role, r in backend.seen if role == "detector"]
    assert len(detected) == 2 * (4 + 2 * 2 + 4)  # orders x (held-out at 0, 2 iterations x (2 attacks + held-out))
    assert "reflection" not in yaml.safe_load((tmp_path / "opt" / "iteration-01.yaml").read_text())


def strip_times(path):
    data = yaml.safe_load(path.read_text())
    data.pop("seconds")
    return data


def test_a_killed_run_resumes_with_identical_outputs(tmp_path):
    data = write_labelled(tmp_path / "data.jsonl")
    full = tmp_path / "full"
    cfg = config(tmp_path, data)
    cfg.out = str(full)
    first = learning_backend()
    Optimiser(cfg, model_of(first)).run()
    total = len(first.seen)

    killed = tmp_path / "killed"  # as if killed during iteration 1: part of its calls journaled
    killed.mkdir()
    shutil.copy(full / "manifest.json", killed)
    shutil.copy(full / "iteration-00.yaml", killed)
    lines = (full / "calls.jsonl").read_text().splitlines(keepends=True)
    kept = 15
    (killed / "calls.jsonl").write_text("".join(lines[:kept]) + lines[kept][:40])  # and a torn last line
    cfg.out = str(killed)
    again = learning_backend()
    Optimiser(cfg, model_of(again)).run()
    assert len(again.seen) == total - kept  # every journaled call replayed, nothing asked twice
    for name in ("iteration-00.yaml", "iteration-01.yaml", "iteration-02.yaml"):
        assert strip_times(killed / name) == strip_times(full / name)
    assert yaml.safe_load((killed / "principles.yaml").read_text()) == yaml.safe_load((full / "principles.yaml").read_text())
    keys = [r["key"] for r in read_jsonl(killed / "calls.jsonl")]
    assert len(keys) == len(set(keys)) == total

    idle = learning_backend()  # a finished run re-run: nothing asked; more iterations continue it
    Optimiser(cfg, model_of(idle)).run()
    assert idle.seen == []
    cfg.iterations = 3
    Optimiser(cfg, model_of(idle)).run()
    assert idle.seen and (killed / "iteration-03.yaml").is_file()
    cfg.reflect = False
    with pytest.raises(UsageError, match=r"reflect=True \(now False\)"):
        Optimiser(cfg, model_of(idle)).run()


def test_labelled_data_and_splits(tmp_path):
    data = write_labelled(tmp_path / "split.jsonl", split=True)
    opt, held = split_examples(load_labelled(data), None, 0)
    assert {e.group for e in held} == {"w0", "w3"} and len(opt) == 8
    with pytest.raises(UsageError, match="own 'split'"):
        split_examples(load_labelled(data), 0.5, 0)
    rows = [Example(f"{i}", "p", "r", i % 2, f"grp{i // 2}") for i in range(20)]
    opt, held = split_examples(rows, 0.3, 1)
    assert len({e.group for e in held}) == 3 and {e.group for e in held}.isdisjoint({e.group for e in opt})
    assert split_examples(rows, 0.3, 1) == (opt, held)
    bad = tmp_path / "bad.jsonl"
    for line, match in [('{"response": "x", "label": 2}', "label"), ('{"response": "x", "label": 1, "split": "train"}',
                                                                     "split"), ("", "no labelled rows")]:
        bad.write_text(line + "\n")
        with pytest.raises(UsageError, match=match):
            load_labelled(bad)
    with pytest.raises(UsageError, match="required"):
        Optimiser(OptimizeConfig())


def test_given_splits_never_put_one_group_on_both_sides(tmp_path):
    """A passage held out while its damaged twin (same work) is optimised on was accepted."""
    rows = [{"id": "a", "prompt": "p", "response": "A careful tale.", "label": 1, "work": "w1", "split": "heldout"},
            {"id": "a/loop", "prompt": "p", "response": "LOOP LOOP.", "label": 0, "work": "w1",
             "split": "optimisation"},
            {"id": "b", "prompt": "p", "response": "Another tale.", "label": 1, "work": "w2", "split": "heldout"},
            {"id": "c", "prompt": "p", "response": "A third tale.", "label": 1, "work": "w3", "split": "optimisation"}]
    path = tmp_path / "leaky.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(UsageError, match="group 'w1' has rows in both splits"):
        split_examples(load_labelled(path), None, 0)


@pytest.mark.parametrize(("args", "message"), [
    ([], "--labelled DATA.jsonl is required"),
    (["--verdict", "vibes"], "--verdict: 'vibes' is not one of"),
    (["--verdict", "sample", "--orders", "2"], "label orders must be 1 or 2"),
    (["--heldout-fraction", "1.5"], "--heldout-fraction must be in (0, 1), got 1.5"),
])
def test_bad_options_are_one_error_line(tmp_path, capsys, args, message):
    from generate.common.cli import run_cli
    from rewards.principles.cli import main

    data = write_labelled(tmp_path / "data.jsonl")
    labelled = [] if not args else ["--labelled", str(data)]
    with pytest.raises(SystemExit) as exit_:
        run_cli(main, ["optimize", *labelled, *args, "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and err.startswith("error: ") and message in err and len(err.splitlines()) == 1
