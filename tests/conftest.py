import os

os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"  # litellm must never fetch its cost map over the network in tests
