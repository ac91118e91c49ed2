"""The bundled SmolLM2-135M playing every role: a real optimisation in logprob mode on a handful of
weakly labelled passages, and the `principle_judge` reward inside a real GRPO step."""

from __future__ import annotations

import pytest
import yaml

from generate.common.jsonl import read_jsonl
from rewards import build_rewards
from rewards.principles.optimize import Optimiser, OptimizeConfig
from rewards.principles.weak_labels import WeakLabelConfig, build

pytestmark = pytest.mark.slow


def test_a_real_optimisation_runs_and_resumes(tmp_path, prose_corpus, default_model):
    data = build(WeakLabelConfig(reference_dir=str(prose_corpus), out=str(tmp_path / "weak.jsonl"), works=2,
                                 per_work=1, words=25, heldout_fraction=0.5))
    cfg = OptimizeConfig(labelled=str(data), out=str(tmp_path / "opt"), iterations=1, attacks=1, max_new_tokens=24,
                         max_diagnoses=1)
    Optimiser(cfg, default_model).run()
    rows = list(read_jsonl(tmp_path / "opt" / "metrics.jsonl"))
    assert [r["iteration"] for r in rows] == [0, 1] and all(r["n"] == 2 and r["missing"] == 0 for r in rows)
    assert all(r[k] is None or 0 <= r[k] <= 1 for r in rows for k in ("accuracy", "precision", "recall", "f1", "auc"))
    record = yaml.safe_load((tmp_path / "opt" / "iteration-01.yaml").read_text())
    assert set(record["heldout_p_good"].values()) and all(0 <= p <= 1 for p in record["heldout_p_good"].values())
    assert record["requests"]["generate"] == 1 and record["requests"]["evaluate"] == 4  # 2 rows x 2 label orders
    assert all(u["used"] or u["reason"] for u in record["updates"])  # every rewrite used or its failure said why
    journaled = len((tmp_path / "opt" / "calls.jsonl").read_text().splitlines())
    (tmp_path / "opt" / "iteration-01.yaml").unlink()  # as if killed before the iteration was written
    calls_before = default_model.calls
    Optimiser(cfg, default_model).run()
    assert default_model.calls == calls_before  # everything replayed from the journal
    assert len((tmp_path / "opt" / "calls.jsonl").read_text().splitlines()) == journaled
    assert yaml.safe_load((tmp_path / "opt" / "iteration-01.yaml").read_text())["principles"] == record["principles"]


@pytest.mark.train
def test_principle_judge_inside_a_real_grpo_step(tmp_path):
    """One GRPO step whose reward is the bundled model judging under our principles (P(good))."""
    from tests.train.conftest import one_grpo_step

    funcs = build_rewards(["principle_judge", "length"], {"principle_judge": {"timeout": 300, "batch_size": 4},
                                                          "length": {"target_words": 5}})
    logged = one_grpo_step(tmp_path, funcs)
    assert 0.0 <= logged["rewards/principle_judge/mean"] <= 1.0
    assert logged["rewards/principle_judge/filled"] == 0.0  # no judge failure
