"""`pschaos image`: build the self-contained image the docker backend runs, print its tag.

The docker backend builds it by itself when a run needs it; this verb does it ahead of time (a
CI step before the suite, a machine image) and can give it a name of the user's own, for
docker/compose.yaml (`--tag pschaos:local`) or a registry.
"""
from __future__ import annotations

import argparse
import json

from pschaos.harness.backends.docker import engine


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("image", help="build the self-contained docker image (psnodes from this pschaos's wheel, "
                                     "etcd, Toxiproxy) and print its tag")
    p.add_argument("--tag", metavar="NAME", help="also tag it NAME (e.g. pschaos:local for docker/compose.yaml)")
    p.add_argument("--base", metavar="IMAGE",
                   help="build on this base instead of the Debian one made with debootstrap "
                        "(e.g. python:3.11-slim-bookworm where the engine can pull)")
    p.add_argument("--json", action="store_true", help="the tags as one JSON object")
    p.set_defaults(fn=cmd_image)


def split_tag(name: str) -> tuple[str, str]:
    """`registry:5000/team/ps:1.2` -> ("registry:5000/team/ps", "1.2"); no tag: "latest"."""
    repo, sep, version = name.rpartition(":")
    if not sep or "/" in version:
        return name, "latest"
    return repo, version


def cmd_image(args: argparse.Namespace) -> int:
    from pschaos.harness.backends.docker.build import ensure_self_contained

    client = engine.client(timeout=600)
    try:
        tag = ensure_self_contained(client, base=args.base)
        if args.tag:
            client.images.get(tag).tag(*split_tag(args.tag))
    finally:
        client.close()
    print(json.dumps({"image": tag, "tag": args.tag}) if args.json else tag)
    return 0
