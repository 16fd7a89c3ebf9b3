"""nftables rules of a run, in a table of its own (`inet pschaos_<run>`).

Rules match the TCP ports of link proxies, so a rule cuts or thins exactly the directed links
it names, on loopback. Deleting the table removes every rule; `pschaos clean` deletes tables of
runs whose owner died.
"""
from __future__ import annotations

import json
import re
import subprocess

from .errors import NetFaultError

PREFIX = "pschaos_"


def table_name(run_id: str) -> str:
    return PREFIX + re.sub(r"[^A-Za-z0-9_]", "_", run_id)


def nft(*args: str, input_: str | None = None) -> str:
    try:
        out = subprocess.run(["nft", *args], input=input_, capture_output=True, text=True, timeout=10)
    except FileNotFoundError:
        raise NetFaultError("nft is not installed; install it with: apt-get install -y nftables") from None
    except subprocess.TimeoutExpired:
        raise NetFaultError(f"nft {' '.join(args)[:120]}: no answer within 10 s") from None
    if out.returncode != 0:
        raise NetFaultError(f"nft {' '.join(args)[:120]}: {out.stderr.strip()[:300]}")
    return out.stdout


class NftTable:
    def __init__(self, run_id: str) -> None:
        self.name = table_name(run_id)
        self.created = False

    def create(self) -> None:
        nft("-f", "-", input_=f"table inet {self.name} {{\n"
                               f"  chain out {{ type filter hook output priority 0; policy accept; }}\n}}\n")
        self.created = True

    def add_drop(self, ports: list[int], percent: float, tag: str) -> list[int]:
        """Drop `percent`% of packets to and from each port (both directions of those flows).

        Returns the rule handles, for `delete`. percent=100 cuts the links entirely.
        """
        if not self.created:
            self.create()
        before = set(self.handles())
        for p in ports:
            for direction in ("dport", "sport"):
                cond = "" if percent >= 100 else f"numgen random mod 10000 < {int(round(percent * 100))} "
                nft("add", "rule", "inet", self.name, "out", "tcp", direction, str(p), *cond.split(), "counter", "drop",
                    "comment", f'"{tag}"')
        return sorted(set(self.handles()) - before)

    def rules(self) -> list[dict]:
        if not self.created:
            return []
        data = json.loads(nft("-j", "list", "table", "inet", self.name))
        return [x["rule"] for x in data["nftables"] if "rule" in x]

    def handles(self) -> list[int]:
        return [r["handle"] for r in self.rules()] if self.created else []

    def dropped(self, handles: list[int] | None = None) -> int:
        """Packets dropped by the given rules (all rules when None), from their counters."""
        total = 0
        for r in self.rules():
            if handles is None or r["handle"] in handles:
                for e in r["expr"]:
                    if "counter" in e:
                        total += e["counter"]["packets"]
        return total

    def delete(self, handles: list[int]) -> None:
        if not self.created:
            return                               # the table (and every rule) is already gone
        errors = []
        for h in handles:
            try:
                nft("delete", "rule", "inet", self.name, "out", "handle", str(h))
            except NetFaultError as e:      # already gone is fine; still there is not (checked below)
                errors.append(str(e))
        left = sorted(set(handles) & set(self.handles())) if errors else []
        if left:
            raise NetFaultError(f"nft rules {left} of table {self.name} could not be deleted: {errors[0]}")

    def destroy(self, force: bool = False) -> None:
        """Delete the table and every rule in it. `force` tries even when this object did not see
        it created (teardown after an interrupt can land between the nft call and the flag)."""
        if self.created or force:
            try:
                nft("delete", "table", "inet", self.name)
            except NetFaultError:
                pass
            self.created = False


def tables() -> list[str]:
    """Names of every pschaos table on this machine."""
    try:
        out = nft("list", "tables")
    except NetFaultError:
        return []
    return [line.split()[-1] for line in out.splitlines() if line.split()[-1].startswith(PREFIX)]


def delete_table(name: str) -> None:
    nft("delete", "table", "inet", name)
