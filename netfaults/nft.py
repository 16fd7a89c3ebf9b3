"""nftables rules of a run, in a table of its own (`inet pschaos_<run>`).

Rules match the TCP ports of link proxies, so a rule cuts or thins exactly the directed links
it names, on loopback. Deleting the table removes every rule; `pschaos clean` deletes tables of
runs whose owner died.
"""
from __future__ import annotations

import json
import re
import subprocess

from pschaos.netfaults.errors import NetFaultError

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
        self.batches = 0            # add_drop calls so far: each call's comment is unique

    def create(self) -> None:
        nft("-f", "-", input_=f"table inet {self.name} {{\n"
                               f"  chain out {{ type filter hook output priority 0; policy accept; }}\n}}\n")
        self.created = True

    def add_drop(self, ports: list[int], percent: float, tag: str) -> list[int]:
        """Drop `percent`% of packets to and from each port (both directions of those flows).

        Every rule goes in one nft transaction, so the links are cut at one moment: added one
        `nft` call at a time, a four-link partition took effect over some 50 ms on a loaded
        machine, and replicas still heard their primary well after the recorded fault start
        (the SimPy twin cuts every link at once, so the two backends disagreed by that much).
        Returns the rule handles, for `delete`. percent=100 cuts the links entirely.
        """
        if not self.created:
            self.create()
        cond = "" if percent >= 100 else f"numgen random mod 10000 < {int(round(percent * 100))} "
        self.batches += 1
        mark = f"{tag} {self.batches}"          # this call's rules alone, found again by their comment
        lines = [f'add rule inet {self.name} out tcp {direction} {p} {cond}counter drop comment "{mark}"'
                 for p in ports for direction in ("dport", "sport")]
        if not lines:
            return []
        try:
            echoed = nft("--echo", "--handle", "-f", "-", input_="\n".join(lines) + "\n")
            handles = sorted(int(h) for h in re.findall(r"# handle (\d+)", echoed))
            if len(handles) != len(lines):
                raise NetFaultError(f"nft added {len(lines)} rules to table {self.name} but echoed {len(handles)} "
                                    f"handles: {echoed.strip()[:300]}")
        except BaseException:
            # the transaction may have landed (a timeout, an echo we could not read, a Ctrl-C):
            # no caller holds these handles, so the rules go now, or the links stay cut after a heal
            self._sweep(mark)
            raise
        return handles

    def _sweep(self, mark: str) -> None:
        """Remove every rule whose comment is `mark` (best effort: the table goes at teardown)."""
        try:
            left = [r["handle"] for r in self.rules() if r.get("comment") == mark]
            if left:
                nft("-f", "-", input_="".join(f"delete rule inet {self.name} out handle {h}\n" for h in left))
        except (NetFaultError, ValueError, KeyError):
            pass

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
        """Remove the rules in one transaction (the links heal at one moment); if that fails
        (one is gone already), one by one, and then every handle must be gone."""
        if not self.created or not handles:
            return                               # the table (and every rule) is already gone
        try:
            nft("-f", "-", input_="".join(f"delete rule inet {self.name} out handle {h}\n" for h in handles))
            return
        except NetFaultError:
            pass
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
