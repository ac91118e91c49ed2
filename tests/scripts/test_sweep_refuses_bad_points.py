"""A sweep builds every grid point's run config before it writes or loads anything: a point that
would be refused (one agent for review, zero rounds) stops it with one line and exit 2, not after
its manifest, its model and the earlier axes' generations."""

import pytest

from eval import sweep
from generate.common.cli import run_cli


@pytest.mark.parametrize(("grid", "message"), [
    (["--grid", "agents=1,3"], "--grid agents=1: --agents 1: review needs at least 2 agents"),
    (["--grid", "rounds=1,2", "--grid", "agents=1,3"], "--grid agents=1: --agents 1: review needs at least 2 agents"),
    (["--grid", "rounds=0,2"], "--grid rounds=0: --rounds must be >= 1, got 0"),
])
def test_a_bad_grid_point_is_refused_before_anything_is_written(tmp_path, monkeypatch, capsys, grid, message):
    loaded = []
    monkeypatch.setattr("generate.backends.load_model", lambda *a, **k: loaded.append(a) or pytest.fail("loaded"))
    out = tmp_path / "sweep"
    with pytest.raises(SystemExit) as info:
        run_cli(sweep.main, [*grid, "--limit", "1", "--out", str(out)])
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
    assert info.value.code == 2 and len(errors) == 1 and message in errors[0], errors
    assert not out.exists() and not loaded


def test_every_point_of_a_good_grid_gets_its_run(tmp_path):
    cfg = sweep.SweepConfig(grid=["rounds=1,3", "agents=2"], limit=1)
    runs = sweep.point_runs(cfg, sweep.parse_grid(cfg.grid), tmp_path)
    assert [(v, r.rounds, r.agents, r.out) for v, r in runs["rounds"]] == [
        (1, 1, 3, str(tmp_path / "rounds=1")), (3, 3, 3, str(tmp_path / "default"))]
    assert [(v, r.agents, r.limit) for v, r in runs["agents"]] == [(2, 2, 1)]


@pytest.mark.parametrize(("grid", "message"), [
    (["rounds=1,2", "rounds=3"], "--grid rounds given twice"),
    (["temperature=1,1.0"], "names a value twice"),
])
def test_a_point_given_twice_is_refused_not_dropped(grid, message):
    from generate.common.errors import UsageError

    with pytest.raises(UsageError, match=message):
        sweep.parse_grid(grid)
