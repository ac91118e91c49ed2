"""`python -m eval.rating`: an alias of `review-lab rate` (`eval/rating/cli.py`)."""
from eval.rating.cli import main
from generate.common.cli import run_cli

if __name__ == "__main__":
    run_cli(main)
