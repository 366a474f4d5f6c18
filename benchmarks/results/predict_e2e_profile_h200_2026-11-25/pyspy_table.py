"""The main thread's time in each `genolin predict` profile of pyspy_raw.tgz, by stage: a markdown table.

py-spy ran with --idle --threads --subprocesses at 50 samples/s (profile_e2e.sh), so a sample is 20 ms of wall clock
whether the thread ran or waited (for the GPU, a lock or the GIL). Stages are recognised by frames on the stack:

    python pyspy_table.py pyspy_raw.tgz
"""

import collections
import sys
import tarfile

RATE = 50  # samples per second
STAGES = ("start-up (imports, CLI)", "compile set-up (importing the compiler)", "loading the model",
          "dynamo: tracing, compiled graphs from the cache", "model forward (launch, wait for the GPU)",
          "peak calling", "bedGraph writer (dispatch, waiting for workers)", "pieces, copies back", "other")


def stage(frames: list[str]) -> str:
    s = ";".join(frames)
    if "TrackTask.predict" not in s:
        if "compile_blocks" in s:
            return STAGES[1]
        return STAGES[2] if "load_run" in s else STAGES[0]
    if "ConvertFrame" in s:
        return STAGES[3]
    if "Predictor.outputs" in s or "Predictor._forward" in s:
        return STAGES[4]
    if "PeakCaller" in s or "window_max" in s:
        return STAGES[5]
    if "BedGraphWriter" in s or "Stretches" in s:
        return STAGES[6]
    if "region_probs" in s:
        return STAGES[7]
    return STAGES[8]


def main(path: str) -> None:
    table = {}
    with tarfile.open(path) as tar:
        for member in sorted(tar.getmembers(), key=lambda m: m.name):
            counts = collections.Counter()
            for line in tar.extractfile(member).read().decode().splitlines():
                stack, _, n = line.rpartition(" ")
                frames = stack.split(";")
                if len(frames) > 1 and "MainThread" in frames[1]:  # the genolin process's main thread
                    counts[stage(frames)] += int(n)
            table[member.name.removesuffix(".raw")] = counts
    names = list(table)
    print("| main thread, s | " + " | ".join(names) + " |")
    print("|---|" + "---:|" * len(names))
    for st in STAGES:
        print(f"| {st} | " + " | ".join(f"{table[n][st] / RATE:.2f}" for n in names) + " |")
    print("| **after load** (the last six) | " + " | ".join(
        f"{sum(table[n][st] for st in STAGES[3:]) / RATE:.2f}" for n in names) + " |")
    print("| total | " + " | ".join(f"{sum(table[n].values()) / RATE:.2f}" for n in names) + " |")


if __name__ == "__main__":
    main(sys.argv[1])
