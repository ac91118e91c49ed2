"""`python -m eval`: an alias of `review-lab eval` (`eval/cli.py`)."""
from eval.cli import main
from generate.common.cli import run_cli

if __name__ == "__main__":
    run_cli(main)
