"""fairshare: multi-resource, hierarchical fair-share scheduling.

The public entry points of the library:

- :func:`fairshare.model.load_scenario` reads and validates a scenario file.
- :func:`fairshare.allocate` computes a policy's static allocation.
- :func:`fairshare.audit.audit` checks the papers' fairness properties on it.
"""

from fairshare.api import allocate, get_policy, policy_names

__all__ = ["allocate", "get_policy", "policy_names"]
__version__ = "0.1.0"
