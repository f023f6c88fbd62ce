import os

from hypothesis import settings

os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"  # litellm must never fetch its cost map over the network in tests

# CI runs the property tests with a fixed seed, so a red build is reproducible and a green one is not
# luck; locally every run explores new examples (HYPOTHESIS_PROFILE=ci to reproduce CI).
settings.register_profile("ci", derandomize=True, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "default"))
