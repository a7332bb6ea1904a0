"""fairshare: multi-resource, hierarchical fair-share scheduling.

The public entry points of the library:

- :func:`fairshare.model.load_scenario` reads and validates a scenario file.
- :func:`fairshare.allocate` computes a policy's static allocation.
- :func:`fairshare.audit.audit` checks the papers' fairness properties on it.
"""

__all__ = ["allocate", "get_policy", "policy_names"]
__version__ = "0.1.0"


def __getattr__(name: str):
    # The entry points live in fairshare.api, which imports every policy (numpy, scipy):
    # loaded on first use (PEP 562), so `fairshare --version` and the HTTP clients, which
    # import this package, start without them.
    if name in __all__:
        from fairshare import api

        return getattr(api, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
