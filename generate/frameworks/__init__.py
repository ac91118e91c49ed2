"""Framework registry: importing this package registers every framework by name."""

from generate.frameworks import debate, discussion, review, single, teacher  # noqa: F401 - registration
from generate.frameworks.base import (
    FRAMEWORKS,
    REVIEW_VARIANTS,
    Agent,
    Call,
    Settings,
    Step,
    check_agents,
    get_framework,
    planned_calls,
)

__all__ = ["FRAMEWORKS", "REVIEW_VARIANTS", "Agent", "Call", "Settings", "Step", "check_agents", "get_framework",
           "planned_calls"]
