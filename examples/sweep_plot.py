"""Sweep loss rates x {quic, art, or3} x seeds on Ray and plot the mean
recovery latency against the loss rate (matplotlib). Needs the extras
sweep and plot: pip install 'artq[sweep,plot]'.

    python examples/sweep_plot.py --seeds 5 --out sweep-out      # local Ray
    python examples/sweep_plot.py --address ray://head:10001      # a cluster

Writes sweep_runs.csv and sweep_summary.csv (artq reproduce's formats) and
recovery_latency.png into --out. Run as a test at a tiny size by
tests/python/test_sweep.py.
"""

import argparse
import os

import artq

SCHEMES = ("quic", "art", "or3")


def main(losses=(0.01, 0.02, 0.05), seeds=3, size="1MB", out="sweep-out", address=None):
    """Runs the sweep; returns (DataFrame, path of the plot)."""
    try:
        import matplotlib
    except ImportError as e:
        raise artq.MissingExtraError(
            f"examples/sweep_plot.py needs matplotlib ({e}): pip install 'artq[plot]'"
        ) from e

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    grid = {
        "base": {"workload": {"size": size}, "link": {"bw": 50, "rtt": 50}},
        "scenarios": {f"loss={loss}": {"link": {"loss": loss}} for loss in losses},
        "schemes": list(SCHEMES),
    }
    df = artq.sweep(grid, seeds=seeds, address=address, out=out)
    df["loss"] = df["group"].str.removeprefix("loss=").astype(float)
    mean = df[df["error"] == ""].groupby(["scheme", "loss"])["recovery_latency_ms.mean"].mean()
    fig, ax = plt.subplots(figsize=(5, 3.5))
    for scheme in SCHEMES:
        s = mean.loc[scheme]
        ax.plot(s.index * 100, s.values, marker="o", label=scheme)
    ax.set_xlabel("loss rate (%)")
    ax.set_ylabel("mean recovery latency (ms)")
    ax.legend()
    fig.tight_layout()
    path = os.path.join(out, "recovery_latency.png")
    fig.savefig(path)
    plt.close(fig)
    return df, path


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--out", default="sweep-out")
    p.add_argument("--address", default=None, help="a Ray cluster (default: local Ray)")
    a = p.parse_args()
    df, path = main(seeds=a.seeds, out=a.out, address=a.address)
    print(df.groupby(["group", "scheme"])["recovery_latency_ms.mean"].mean().unstack())
    print("plot:", path)
