"""Redaction throughput (docs/agent-yaml.md): MB/s of ``redact_text`` on ordinary and adversarial
text, at growing sizes, so a super-linear pattern shows as MB/s falling with size.

    .venv/bin/python bench/redaction_bench.py [--sizes 1,4,16] [--secrets 4]

Ordinary text is a model reply with a few URLs, flags and a planted key; adversarial text
repeats the shapes that made the old patterns backtrack (``x`` runs, dashes, ``a://``,
``--token``, ``Bearer``, ``?key=&``, key fragments). Ends with a ``RATIOS`` line: the MB/s at
the largest size over the MB/s at the smallest, per input (≈1 for linear time)."""

from __future__ import annotations

import argparse
import time

from holodeck_core.redaction import redact_text, register_secret

SECRET = "sk-bench-canary-9a8b7c6d5e4f3a2b"
ORDINARY = (
    "The capital of France is Paris. See https://docs.example.com/guide?lang=en&page=2 and "
    "run `tool --verbose --output out.json` to reproduce. Authorization worked for user ana; "
    f"the key {SECRET} was rotated yesterday, and 3 of 4 checks passed.\n"
)
ADVERSARIAL = {
    "x-run": "x",
    "dashes": "-",
    "schemes": "a://",
    "flags": "--token",
    "bearer": "Bearer ",
    "query": "?key=&",
    "userinfo": "https://u:",
    "key-pieces": f"{SECRET[:9]}*",
}


def measure(text: str, repeat: int = 3) -> float:
    """The best MB/s of ``repeat`` calls (CPU time, so other load matters less)."""
    best = float("inf")
    for _ in range(repeat):
        start = time.process_time()
        redact_text(text)
        best = min(best, time.process_time() - start)
    return len(text.encode()) / 1e6 / max(best, 1e-9)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1,4,16", help="input sizes in MB")
    parser.add_argument("--secrets", type=int, default=4, help="registered secret values")
    args = parser.parse_args()
    sizes = [float(s) for s in args.sizes.split(",")]
    register_secret(SECRET)
    for number in range(args.secrets - 1):
        register_secret(f"canary-secret-value-{number:04d}-abcdef")
    inputs = {"ordinary": ORDINARY, **ADVERSARIAL}
    print(f"{'input':<12}" + "".join(f"{f'{size:g} MB':>12}" for size in sizes) + "   (MB/s)")
    ratios = []
    for name, unit in inputs.items():
        rates = []
        for size in sizes:
            text = unit * (int(size * 1e6) // len(unit))
            rates.append(measure(text))
        print(f"{name:<12}" + "".join(f"{rate:>12.1f}" for rate in rates))
        ratios.append(f"{name}={rates[-1] / rates[0]:.2f}")
    print("RATIOS " + " ".join(ratios))


if __name__ == "__main__":
    main()
