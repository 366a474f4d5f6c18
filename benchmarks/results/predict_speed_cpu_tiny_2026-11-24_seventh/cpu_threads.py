"""genolin predict with genolin.inference.CPU_MODEL_THREADS from $CMT (device experiment)."""
import os
import time

import genolin.inference as inf

if os.environ.get("CMT"):
    inf.CPU_MODEL_THREADS = int(os.environ["CMT"])
if __name__ == "__main__":
    t = time.perf_counter()
    from genolin.cli import main
    try:
        main()
    except SystemExit as e:
        if e.code:
            raise
    print(f"CMT={os.environ.get('CMT')} wall {time.perf_counter() - t:.2f} s", flush=True)
