"""`python -m eval.corpus`: the same command as `review-lab corpus`."""

from eval.corpus.cli import main
from generate.common.cli import run_cli

if __name__ == "__main__":
    run_cli(main)
