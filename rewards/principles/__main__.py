"""`python -m rewards.principles`: an alias of `review-lab principles` (`rewards/principles/cli.py`)."""
from generate.common.cli import run_cli
from rewards.principles.cli import main

if __name__ == "__main__":
    run_cli(main)
