"""Suite-wide settings: Hypothesis profiles.

Locally, Hypothesis explores with fresh random seeds and remembers failures in its
example database, so a run can find new bugs. In CI (``CI`` set) the same number of
examples runs derandomized and without a database, so a green commit stays green: a
red CI run then means the code changed, not the dice.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

settings.register_profile("default", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile(
    "ci",
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    derandomize=True,
    database=None,
    print_blob=True,
)
settings.load_profile("ci" if os.environ.get("CI") else "default")
