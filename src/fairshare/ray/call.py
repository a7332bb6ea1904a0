"""``python -m fairshare.ray.call PAYLOAD``: the entrypoint of a function submitted with
``fairshare.ray.submit``. serve's driver runs it in the program's placement group; it
calls the pickled ``fn(*args, **kwargs)`` and prints its result (if not None)."""

from __future__ import annotations

import base64
import sys


def main(argv: list[str]) -> int:
    from ray import cloudpickle

    if len(argv) != 1:
        print("usage: python -m fairshare.ray.call PAYLOAD", file=sys.stderr)
        return 2
    fn, args, kwargs = cloudpickle.loads(base64.urlsafe_b64decode(argv[0].encode("ascii")))
    result = fn(*args, **kwargs)
    if result is not None:
        print(repr(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
