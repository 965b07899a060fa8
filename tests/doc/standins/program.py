#!/usr/bin/env python3
"""Doc-test stand-in for the user's program the pages run (train.py, eval.py, ...): it prints the GPUs
it was given and exits 0, or exits 3 when CUDA_VISIBLE_DEVICES is not in its environment (it would
then use every GPU: the accident gpulane exists to prevent). With --out DIR it makes DIR (and runs/)."""
import os
import sys

name = os.path.basename(sys.argv[0])
visible = os.environ.get("CUDA_VISIBLE_DEVICES")
if visible is None:
    print(f"{name} (doc-test stand-in): CUDA_VISIBLE_DEVICES is not in my environment, so I would use every GPU",
          file=sys.stderr)
    sys.exit(3)
order = os.environ.get("CUDA_DEVICE_ORDER", "(not set)")
print(f"{name} (doc-test stand-in): CUDA_VISIBLE_DEVICES={visible} CUDA_DEVICE_ORDER={order}")
os.makedirs("runs", exist_ok=True)
if "--out" in sys.argv[1:-1]:
    os.makedirs(sys.argv[sys.argv.index("--out") + 1], exist_ok=True)
