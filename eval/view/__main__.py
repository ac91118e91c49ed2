"""`python -m eval.view`: an alias of `review-lab view` (`eval/view/cli.py`)."""
from eval.view.cli import main
from generate.common.cli import run_cli

if __name__ == "__main__":
    run_cli(main)
