"""The main job (`review-lab benchmark`): `run` generates and evaluates every framework, `table`
joins their evaluations and inference costs into the paper's Table 1 layout."""

from eval.benchmark.table import benchmark_table, write_benchmark

__all__ = ["benchmark_table", "write_benchmark"]
