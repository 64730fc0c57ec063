#!/usr/bin/env python3
"""Plot loss curves from strata's JSONL metrics (train_gpt / train_llama --metrics).

    scripts/plot_loss.py runs/train_llama/metrics.jsonl -o runs/train_llama/loss.png
    scripts/plot_loss.py ddp.jsonl zero3.jsonl --labels DDP "ZeRO-3" -o compare.png

Each file contributes its training loss (records with "loss") as a line and its validation
loss (records with "val_loss") as markers, both against "step". Needs python3-matplotlib.
"""
import argparse
import json
import sys


def read_metrics(path):
    """(train steps, train losses, validation steps, validation losses) of one JSONL file."""
    train, val = ([], []), ([], [])
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as e:
                sys.exit(f"plot_loss: {path}:{number}: not JSON ({e})")
            # A null loss is a non-finite value (JSON has no NaN): left out of the plot.
            for key, (steps, values) in (("loss", train), ("val_loss", val)):
                if record.get(key) is not None:
                    steps.append(record["step"])
                    values.append(record[key])
    return train[0], train[1], val[0], val[1]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("metrics", nargs="+", help="JSONL metrics files")
    parser.add_argument("-o", "--output", default="loss.png", help="PNG to write (default: loss.png)")
    parser.add_argument("--labels", nargs="+", help="one legend label per file (default: the file names)")
    parser.add_argument("--title", default="loss", help="the plot's title")
    args = parser.parse_args()
    labels = args.labels or args.metrics
    if len(labels) != len(args.metrics):
        sys.exit(f"plot_loss: {len(labels)} labels for {len(args.metrics)} files")

    import matplotlib

    matplotlib.use("Agg")  # files only, no display needed
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 5))
    plotted = 0
    for path, label in zip(args.metrics, labels):
        train_steps, train_loss, val_steps, val_loss = read_metrics(path)
        line = None
        if train_steps:
            (line,) = ax.plot(train_steps, train_loss, linewidth=1, label=f"{label}: train")
        if val_steps:
            color = line.get_color() if line is not None else None
            ax.plot(val_steps, val_loss, "o--", color=color, markersize=4, label=f"{label}: validation")
        if not train_steps and not val_steps:
            print(f"plot_loss: warning: {path} has no loss records", file=sys.stderr)
        plotted += len(train_steps) + len(val_steps)
    if plotted == 0:
        sys.exit("plot_loss: no loss records in any file")
    ax.set_xlabel("step")
    ax.set_ylabel("loss (nats per token)")
    ax.set_title(args.title)
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(args.output, dpi=100)
    print(f"plot_loss: wrote {args.output}")


if __name__ == "__main__":
    main()
