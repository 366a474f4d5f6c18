"""Which decision threshold a two-class classifier should keep when its validation set is small: the k-mer logistic
regression of benchmarks/gue_promoters.py (k = 1..6, C on dev) on labelled promoter sets, test MCC x 100 at
(a) 0.5, (b) the max-MCC threshold on dev (what genolin stores), (c) that threshold only when its dev MCC beats
0.5's by one standard error of MCC on dev ((1 - MCC^2) / sqrt(n - 1), genolin's score_se), else 0.5.

    python threshold_rule.py OUT_PREFIX SET_DIR [SET_DIR ...]   # each SET_DIR holds {train,dev,test}.csv
"""

import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # benchmarks/
from gue_promoters import kmer_features, read_csv  # noqa: E402

from genolin.tasks.metrics import max_mcc_threshold  # noqa: E402


def mcc(y, p, t):
    from sklearn.metrics import matthews_corrcoef
    return float(matthews_corrcoef(y, p >= t))


def one(set_dir: Path) -> dict:
    from sklearn.linear_model import LogisticRegression

    t0 = time.perf_counter()
    data = {s: read_csv(set_dir / f"{s}.csv") for s in ("train", "dev", "test")}
    x = {s: kmer_features(seqs) for s, (seqs, _) in data.items()}
    y = {s: np.asarray(lab) for s, (_, lab) in data.items()}
    best = None
    for c in (0.1, 1.0, 10.0, 100.0):
        clf = LogisticRegression(C=c, max_iter=2000).fit(x["train"], y["train"])
        dev = mcc(y["dev"], clf.predict_proba(x["dev"])[:, 1], 0.5)
        if best is None or dev > best[0]:
            best = (dev, c, clf)
    dev_half, c, clf = best
    pd, pt = clf.predict_proba(x["dev"])[:, 1], clf.predict_proba(x["test"])[:, 1]
    tuned = max_mcc_threshold(y["dev"], pd)
    n = len(y["dev"])
    se = (1 - dev_half ** 2) / np.sqrt(n - 1)
    rule = tuned["value"] if tuned["mcc"] - dev_half > se else 0.5
    return {"set": set_dir.name, "train": len(y["train"]), "dev": n, "test": len(y["test"]), "C": c,
            "dev_mcc_half": dev_half, "dev_mcc_tuned": tuned["mcc"], "tuned_threshold": tuned["value"], "se": se,
            "test_half": 100 * mcc(y["test"], pt, 0.5), "test_tuned": 100 * mcc(y["test"], pt, tuned["value"]),
            "test_rule": 100 * mcc(y["test"], pt, rule), "rule_threshold": rule,
            "seconds": round(time.perf_counter() - t0, 1)}


def main(out: str, dirs: list[str]) -> None:
    rows = []
    for d in dirs:
        rows.append(one(Path(d)))
        print(json.dumps(rows[-1]), flush=True)
    lines = ["| set | train / dev / test | dev MCC at 0.5 | dev MCC tuned (threshold) | one SE | test at 0.5 | "
             "test tuned | test, rule |", "|---|---|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['set']} | {r['train']:,} / {r['dev']:,} / {r['test']:,} | {r['dev_mcc_half']:.4f} | "
                     f"{r['dev_mcc_tuned']:.4f} ({r['tuned_threshold']:.3f}) | {r['se']:.4f} | {r['test_half']:.2f} | "
                     f"{r['test_tuned']:.2f} | {r['test_rule']:.2f} |")
    Path(out + ".md").write_text("\n".join(lines) + "\n")
    Path(out + ".json").write_text(json.dumps({"command": " ".join(sys.argv), "rows": rows}, indent=1))
    print("\n".join(lines))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
