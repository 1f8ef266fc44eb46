#!/usr/bin/env python3
"""Places a peer report beside a lazylab report: for each workload, the
peer's median step time, each lazylab cell's, and the ratio (peer / lazylab,
so > 1 means lazylab is faster). Both must come from the same run.

  python3 bench/peers/compare.py reports/chain-tiny.json reports/torch.json
"""
import json
import sys


def main():
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    ours, peer = (json.load(open(path)) for path in sys.argv[1:])
    peer_by_workload = {c["workload"]: c for c in peer["cells"]}
    print(f"peer: {peer['peer']}")
    print(f"{'workload':14s} {'pipeline':10s} {'backend':8s} {'lazylab ms':>11s} {'peer ms':>10s} {'peer/lazylab':>13s}")
    for cell in ours["cells"]:
        other = peer_by_workload.get(cell["workload"])
        if not other:
            continue
        mine, theirs = cell["step_ms"]["median"], other["step_ms"]["median"]
        print(f"{cell['workload']:14s} {cell['pipeline']:10s} {cell['backend']:8s} {mine:11.4f} {theirs:10.4f} {theirs / mine:12.2f}x")


if __name__ == "__main__":
    main()
