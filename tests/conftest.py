"""Settings shared by every tier.

Hypothesis: no per-example deadline (the 2-core CI machine runs cluster processes beside the unit
tests, so wall time per example says nothing), and under CI a derandomized search so a run is
reproducible from its commit; locally the search stays random so new counterexamples keep turning up.
"""

import os

from hypothesis import settings

settings.register_profile("zonda", deadline=None)
settings.register_profile("zonda-ci", deadline=None, derandomize=True, print_blob=True)
settings.load_profile("zonda-ci" if os.environ.get("CI") else "zonda")
