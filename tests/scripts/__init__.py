"""Tests of the jobs that were once scripts: `review-lab benchmark`, `sweep`, `device-check`, `story`."""
