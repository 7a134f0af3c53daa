"""Training-step time with paddle's own CPU defaults vs appzoo's.

    python benchmarks/cpu_defaults.py

Runs the same few training steps of the ERNIE classifier in fresh processes:
once with ``OMP_NUM_THREADS=1`` and no MKL switch (what paddle does by
itself), once with what run_trainer.py sets (all cores, and
``MKL_DEBUG_CPU_TYPE=5`` on AMD). Prints the median step time of each and
their ratio, measured in one run.
"""
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CHILD = r"""
import json, statistics, sys, time
sys.path.insert(0, ROOT)
from appzoo.env import configure_cpu
configure_cpu()  # as run_trainer.py does: the defaults, unless the environment already has values
import paddle
from appzoo.encoders import build_encoder, parse_encoder_spec
from tasks.text_classification.model import ErnieFcClassification

paddle.seed(0)
spec = parse_encoder_spec(CONFIG)
encoder, _ = build_encoder(spec, lambda: [chr(0x4e00 + i) for i in range(5000)], "/tmp/appzoo_bench_vocab")
model = ErnieFcClassification(encoder, num_labels=4)
opt = paddle.optimizer.AdamW(learning_rate=1e-4, parameters=model.parameters())
ids = paddle.randint(5, 5000, [BATCH, SEQ])
labels = paddle.randint(0, 4, [BATCH])
times = []
for step in range(STEPS + 2):
    start = time.perf_counter()
    loss = model(ids, labels=labels)["loss"]
    loss.backward()
    opt.step()
    opt.clear_grad()
    float(loss)
    times.append(time.perf_counter() - start)
print(json.dumps({"median_s": statistics.median(times[2:])}))
"""


def measure(env_overrides, config, batch, seq, steps):
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "MKL_DEBUG_CPU_TYPE")}
    env.update(env_overrides)
    code = (CHILD.replace("ROOT", repr(ROOT)).replace("CONFIG", repr(config))
            .replace("BATCH", str(batch)).replace("SEQ", str(seq)).replace("STEPS", str(steps)))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])["median_s"]


def main():
    config = os.path.join(ROOT, "configs", "ernie_mini.json")
    batch, seq, steps = 32, 128, 8
    # an empty MKL_DEBUG_CPU_TYPE keeps configure_cpu() from setting it: MKL's own default path
    paddle_default = measure({"OMP_NUM_THREADS": "1", "MKL_DEBUG_CPU_TYPE": ""}, config, batch, seq, steps)
    mkl_only = measure({"OMP_NUM_THREADS": "1"}, config, batch, seq, steps)
    appzoo_default = measure({}, config, batch, seq, steps)
    print(f"training step of ErnieFcClassification on configs/ernie_mini.json, batch {batch} x {seq} tokens, "
          f"median of {steps} steps")
    print("| settings | step (s) |\n|---|---:|")
    print(f"| paddle's defaults (1 thread, no MKL switch) | {paddle_default:.3f} |")
    print(f"| 1 thread, MKL_DEBUG_CPU_TYPE=5 on AMD | {mkl_only:.3f} |")
    print(f"| appzoo's defaults (all {os.cpu_count()} cores, MKL_DEBUG_CPU_TYPE=5 on AMD) | {appzoo_default:.3f} |")
    print(f"speed-up of appzoo's defaults: {paddle_default / appzoo_default:.2f}x "
          f"(MKL switch alone {paddle_default / mkl_only:.2f}x)")


if __name__ == "__main__":
    main()
