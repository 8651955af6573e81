#!/usr/bin/env bash
# GPU checks of the genome-scale work, in one short run (about 6 minutes on one H100):
#   scan throughput (model-only vs end-to-end vs the null model's host ceiling, bf16 and fp32), variant scoring
#   (projected time for one million variants) and the training-step speedups of bench/train.py on the GPU.
#   Prints the lines to report.
# Needs torch with CUDA and numpy; pyfaidx, biopython, monai, nibabel, pydicom, pyyaml, packaging and
# typing_extensions are installed from wheels in WHEELS (default: .whl
# in the repository root) into a temporary folder when they are missing.
#   bash bench/gpu_check.sh
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" BIOATTN_NO_PROGRESS=1
WHEELS="${WHEELS:-.whl}"
missing=$(python - <<'PY'
import importlib.util
print(" ".join(m for m in ("pyfaidx", "Bio", "monai", "packaging", "nibabel", "pydicom", "yaml", "typing_extensions", "pyBigWig", "cyvcf2") if importlib.util.find_spec(m) is None))
PY
)
if [ -n "$missing" ]; then
  site="$(mktemp -d)"
  echo "installing from $WHEELS for: $missing"
  python -m pip install --quiet --no-deps --no-index --target "$site" "$WHEELS"/*.whl \
    || pip install --quiet --no-deps --no-index --target "$site" "$WHEELS"/*.whl
  export PYTHONPATH="$PYTHONPATH:$site"
fi
logs="$(mktemp -d)"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
timeout 240 python bench/scan.py --device cuda --megabases 24 --precision bf16 fp32 --null-model | tee "$logs"/gpu_scan.txt || echo "scan check failed"
timeout 120 python bench/variants.py --device cuda --variants 200000 | tee "$logs"/gpu_variants.txt || echo "variants check failed"
timeout 150 python bench/scan.py --device cuda --megabases 24 --precision bf16 --compile | tee "$logs"/gpu_scan_compiled.txt || echo "compiled scan check failed"
timeout 240 python bench/train.py --device cuda --warmup 3 --steps 10 | tee "$logs"/gpu_train.txt || echo "train check failed"
echo "== lines to report =="
grep -h "windows/s\|variants/s\|projected\|null-model\|^speedup" "$logs"/gpu_scan.txt "$logs"/gpu_variants.txt "$logs"/gpu_scan_compiled.txt "$logs"/gpu_train.txt
