"""`python -m generate`: an alias of `review-lab generate` (`generate/cli.py`)."""
from generate.cli import main
from generate.common.cli import run_cli

if __name__ == "__main__":
    run_cli(main)
