"""Slurm's association tree (``sacctmgr show assoc -P`` output) -> a scenario's queues.

Slurm (SchedMD/slurm, ``doc/html/fair_tree.shtml``, ``doc/man/man1/sacctmgr.1``) keeps
*associations*: accounts nested under a parent account (``root`` at the top) and users
under accounts, each with ``Fairshare`` shares among its siblings and optional group
limits ``GrpTRES`` (``cpu=100,mem=1000G,gres/gpu=4``).

Input: the ``|``-separated output of ``sacctmgr show assoc -P`` (``-p``, with a trailing
``|``, too), header line first. The tree needs the parent of each account: a
``Par Name`` column (``sacctmgr show assoc format=Account,User,ParentName,Share,GrpTRES
-P``), or the indented ``Account`` column that ``... tree`` writes; without either, every
account sits directly under root (with a warning). Blank lines and lines starting
with ``#`` are skipped (a header comment saying where the output came from).

The mapping (docs/whatif.md, "slurm"):

- accounts are inner queues (``root`` is the scenario's implicit root), users leaves
  under their account: ``physics.alice``; an account with no users and no sub-accounts is
  a leaf;
- ``Share`` (Fairshare) -> weight; ``parent`` (the association uses its parent's shares,
  and its usage counts as the parent's) is approximated by weight 1 among its siblings,
  with a warning;
- ``GrpTRES`` -> limit: ``cpu`` in cores, ``mem`` (MB unless suffixed K/M/G/T/P, powers
  of 1024) -> ``memory`` in GiB, ``gres/gpu`` -> ``gpu``; typed GRES (``gres/gpu:a100``),
  ``node``, ``billing``, licences and the like are named in a warning;
- no guarantees (Slurm has none);
- ``peers.slurm-fairtree.users`` maps each user leaf to its account's path, for the
  ``slurm-fairtree`` baseline (Fair Tree ranks users by Level Fairshare, account by
  account); ``queue_paths`` maps ``account`` and ``account/user`` to the scenario paths,
  for a ``sacct`` history.

Every other limit (``GrpJobs``, ``GrpTRESMins``, ``MaxJobs``, ``MaxTRES``, ``MaxWall``,
``QOS``...) is named in a warning by line and column: ``line 5 (physics/alice).MaxJobs``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from fairshare.importers.base import ClusterSize, ImportedConfig, ImportError_
from fairshare.importers.quantities import GIB, cluster_amounts, positive_weight, queue_name

NAME = "slurm"
SUMMARY = "Slurm associations: the output of sacctmgr show assoc -P (accounts, users, Share, GrpTRES)"
POLICY = "slurm-fairtree"

#: header names (sacctmgr's, lower-cased) the mapping reads
_ACCOUNT, _USER, _PARENT, _SHARE, _GRP_TRES = "account", "user", "par name", "share", "grptres"
_READ = {_ACCOUNT, _USER, _PARENT, _SHARE, _GRP_TRES, "cluster", "partition"}
#: other spellings of those headers (format=ParentName heads its column "Par Name")
_ALIASES = {"parentname": _PARENT, "fairshare": _SHARE}
#: GrpTRES mem suffixes, in MB (Slurm's unit for mem without one)
_MEM_MB = {"K": Fraction(1, 1024), "M": 1, "G": 1024, "T": 1024 ** 2, "P": 1024 ** 3}


@dataclass
class _Assoc:
    """An account (``user`` None) or a user association, as read."""

    account: str
    user: str | None
    where: str  # ``line 5 (physics/alice)``
    shares: str
    grp_tres: str
    parent: str = ""  # the Par Name cell (accounts)
    children: list[_Assoc] = field(default_factory=list)


def read(paths: list[str], cluster: ClusterSize) -> ImportedConfig:
    """The association tree of one ``sacctmgr show assoc -P`` output (module docstring)."""
    if len(paths) != 1:
        raise ImportError_(f"{', '.join(paths) or '(no file)'}: slurm reads one sacctmgr output, "
                           f"got {len(paths)} files")
    path = paths[0]
    imported = ImportedConfig(kind=NAME, queues=[], policy=POLICY)
    rows = _rows(path)
    header, body = rows[0], rows[1:]
    columns = _columns(header, path)
    accounts, users = _associations(body, header[1], columns, path, imported)
    users_peer: dict[str, str] = {}
    try:
        tops = _tree(accounts, users, columns, imported)
        imported.queues = [_entry(a, "", cluster, imported, users_peer) for a in tops]
    except ImportError_ as exc:  # (the rows' problems name their line; the file goes first)
        raise ImportError_(f"{path}: {exc}") from None
    if users_peer:
        imported.peers["slurm-fairtree"] = {"users": users_peer}
    return imported


# --- reading -----------------------------------------------------------------------------------

def _rows(path: str) -> list[tuple[int, list[str]]]:
    """(line number, cells) of every line but blanks and ``#`` comments; ``-p``'s
    trailing ``|`` dropped."""
    try:
        with open(path, encoding="utf-8") as fh:
            lines = fh.read().splitlines()
    except OSError as exc:
        raise ImportError_(f"{path}: cannot read: {exc.strerror or exc}") from None
    rows = []
    trailing_bar = None  # -p ends every line with '|' (the header shows it), -P does not
    for number, line in enumerate(lines, start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if trailing_bar is None:
            trailing_bar = line.rstrip().endswith("|")
        cells = line.rstrip("\r\n").split("|")
        if trailing_bar and len(cells) > 1 and cells[-1] == "":
            cells = cells[:-1]
        rows.append((number, cells))
    if not rows:
        raise ImportError_(f"{path}: no header line: expected the output of sacctmgr show assoc -P")
    return rows


def _columns(header: tuple[int, list[str]], path: str) -> dict[str, int]:
    number, cells = header
    columns: dict[str, int] = {}
    for i, cell in enumerate(cells):
        name = cell.strip().lower()
        columns[_ALIASES.get(name.replace(" ", ""), name)] = i
    if _ACCOUNT not in columns:
        raise ImportError_(f"{path}: line {number}: the header has no Account column (got {'|'.join(cells)!r}); "
                           f"expected the output of sacctmgr show assoc -P with its header (no -n)")
    return columns


def _associations(body: list[tuple[int, list[str]]], heads: list[str], columns: dict[str, int], path: str,
                  imported: ImportedConfig) -> tuple[dict[str, _Assoc], list[_Assoc]]:
    """Account associations by name (first row wins per account) and user associations
    (one per account and user: rows per partition are merged, with a warning)."""
    names = {i: name for name, i in columns.items()}
    accounts: dict[str, _Assoc] = {}
    users: dict[tuple[str, str], _Assoc] = {}
    clusters: dict[str, int] = {}
    for number, cells in body:
        if len(cells) != len(columns):
            raise ImportError_(f"{path}: line {number}: {len(cells)} fields, but the header has {len(columns)}")
        cell = {name: cells[i] for name, i in columns.items()}
        account, user = cell[_ACCOUNT].strip(), cell.get(_USER, "").strip() or None
        if not account:
            raise ImportError_(f"{path}: line {number}.Account: is empty")
        where = f"line {number} ({account}{'/' + user if user else ''})"
        if cell.get("cluster"):
            clusters.setdefault(cell["cluster"], number)
        for i, value in enumerate(cells):
            if names[i] not in _READ and value.strip():
                imported.warn(f"{where}.{heads[i].strip()}", f"{value}: not modelled; ignored")
        assoc = _Assoc(cell[_ACCOUNT], user, where, cell.get(_SHARE, "").strip(), cell.get(_GRP_TRES, "").strip(),
                       cell.get(_PARENT, "").strip())
        if user is None:
            if account in accounts:
                imported.warn(where, f"account {account!r} is listed again ({accounts[account].where}); "
                                     f"the first row is used")
                continue
            accounts[account] = assoc
        else:
            partition = cell.get("partition", "").strip()
            if partition:
                imported.warn(f"{where}.Partition", f"{partition}: per-partition associations are merged into one "
                                                    f"queue per user (the first row's shares and limits)")
            if (account, user) in users:
                continue
            users[(account, user)] = assoc
    if len(clusters) > 1:
        raise ImportError_(f"{path}: associations of several clusters ({', '.join(clusters)}); import one "
                           f"(sacctmgr show assoc cluster=NAME -P)")
    return accounts, list(users.values())


def _tree(accounts: dict[str, _Assoc], users: list[_Assoc], columns: dict[str, int],
          imported: ImportedConfig) -> list[_Assoc]:
    """Accounts under their parents, users under their accounts; the children of root."""
    parents: dict[str, str | None] = {}
    if _PARENT in columns:
        for name, assoc in accounts.items():
            parents[name] = None if name == "root" else (assoc.parent or "root")
    else:
        indented = _indentation_parents(accounts)
        if indented is None:
            imported.warn("header", "no Par Name column and no tree indentation: every account is placed "
                                    "directly under root (add ParentName to format=, or use tree)")
        for name in accounts:
            parents[name] = None if name == "root" else (indented or {}).get(name) or "root"
    if "root" not in accounts and "root" in parents.values():  # (output filtered to some accounts)
        accounts["root"] = _Assoc("root", None, "root", "", "")
        parents["root"] = None
    for user in users:  # an account that only users name (no account row): under root
        if user.account.strip() not in accounts:
            accounts[user.account.strip()] = _Assoc(user.account.strip(), None, user.where, "", "")
            parents[user.account.strip()] = None if user.account.strip() == "root" else "root"
    for name, parent in parents.items():
        if parent is not None and parent not in accounts:
            raise ImportError_(f"{accounts[name].where}.Par Name: parent account {parent!r} has no row")
        seen = [name]
        while parent is not None:
            if parent in seen:
                raise ImportError_(f"{accounts[name].where}.Par Name: accounts form a cycle: "
                                   f"{' -> '.join(seen + [parent])}")
            seen.append(parent)
            parent = parents[parent]
    for name, assoc in accounts.items():
        if parents[name] is not None:
            accounts[parents[name]].children.append(assoc)
    for user in users:
        accounts[user.account.strip()].children.append(user)
    if "root" in accounts:
        root = accounts["root"]
        if root.grp_tres:
            imported.warn(f"{root.where}.GrpTRES", f"{root.grp_tres}: a limit on the root account caps the whole "
                                                   f"cluster; not modelled (the cluster's size is)")
        return root.children
    return [a for name, a in accounts.items() if parents[name] == "root"]


def _indentation_parents(accounts: dict[str, _Assoc]) -> dict[str, str] | None:
    """``sacctmgr show assoc tree`` indents each account one space per level below root;
    None when nothing is indented (the output was not a tree)."""
    if not any(a.account != a.account.lstrip() for a in accounts.values()):
        return None
    parents: dict[str, str] = {}
    stack: list[tuple[int, str]] = []
    for name, assoc in accounts.items():
        depth = len(assoc.account) - len(assoc.account.lstrip())
        while stack and stack[-1][0] >= depth:
            stack.pop()
        if stack:
            parents[name] = stack[-1][1]
        stack.append((depth, name))
    return parents


# --- building the queue entries --------------------------------------------------------------------

def _entry(assoc: _Assoc, parent_path: str, cluster: ClusterSize, imported: ImportedConfig,
           users_peer: dict[str, str]) -> dict[str, Any]:
    raw_name = assoc.user if assoc.user is not None else assoc.account.strip()
    name = queue_name(raw_name, f"{assoc.where}.{'User' if assoc.user else 'Account'}", imported)
    path = f"{parent_path}.{name}" if parent_path else name
    if assoc.user is None:
        imported.queue_paths[assoc.account.strip()] = path
    else:
        imported.queue_paths[f"{assoc.account.strip()}/{assoc.user}"] = path
        if parent_path:  # (a user of the root account has no account queue to name)
            users_peer[path] = parent_path
    entry: dict[str, Any] = {"name": name}
    weight = _weight(assoc, imported)
    if weight != 1.0:
        entry["weight"] = weight
    limit = cluster_amounts(_grp_tres(assoc, imported), f"{assoc.where}.GrpTRES", cluster, imported)
    if limit:
        entry["limit"] = limit
    if assoc.children:
        entry["children"] = [_entry(c, path, cluster, imported, users_peer) for c in assoc.children]
    return entry


def _weight(assoc: _Assoc, imported: ImportedConfig) -> float:
    shares = assoc.shares
    if not shares:
        return 1.0
    if shares.lower() == "parent":
        imported.warn(f"{assoc.where}.Share", "parent (uses its parent's shares, its usage counted as the "
                                              "parent's) is approximated by weight 1 among its siblings")
        return 1.0
    try:
        value = float(shares)
    except ValueError:
        raise ImportError_(f"{assoc.where}.Share: must be a number of shares or 'parent', got {shares!r}") from None
    if value < 0:
        raise ImportError_(f"{assoc.where}.Share: must be >= 0, got {shares!r}")
    return positive_weight(value, f"{assoc.where}.Share", imported)


def _grp_tres(assoc: _Assoc, imported: ImportedConfig) -> dict[str, float]:
    """``cpu=100,mem=1000G,gres/gpu=4`` -> ``{cpu: 100, memory: 1000/1024... GiB, gpu: 4}``."""
    out: dict[str, float] = {}
    where = f"{assoc.where}.GrpTRES"
    for item in filter(None, assoc.grp_tres.split(",")):
        tres, sep, value = item.partition("=")
        if not sep or not value:
            raise ImportError_(f"{where}: {item!r} is not TRES=amount (as in cpu=100,mem=1000G,gres/gpu=4)")
        if tres == "cpu":
            out["cpu"] = float(_number(value, f"{where}.cpu"))
        elif tres == "mem":
            suffix = value[-1].upper() if value[-1].isalpha() else "M"
            if suffix not in _MEM_MB:
                raise ImportError_(f"{where}.mem: {value!r}: the unit must be K, M, G, T or P")
            number = value[:-1] if value[-1].isalpha() else value
            out["memory"] = float(_number(number, f"{where}.mem") * _MEM_MB[suffix] * 2 ** 20 / GIB)
        elif tres == "gres/gpu":
            out["gpu"] = float(_number(value, f"{where}.gres/gpu"))
        else:
            typed = " (typed GPUs are not told apart)" if tres.startswith("gres/gpu:") else ""
            imported.warn(f"{where}.{tres}", f"{value}: a limit on {tres} is not modelled{typed}; ignored")
    return out


def _number(text: str, where: str) -> Fraction:
    try:
        value = Fraction(text)
    except (ValueError, ZeroDivisionError):
        raise ImportError_(f"{where}: {text!r} is not a number") from None
    if value < 0:
        raise ImportError_(f"{where}: must be >= 0, got {text!r}")
    return value
