#!/usr/bin/env bash
# On a lent GPU machine, in the last of the calls that scripts/gpu_pack.py lists: join the payload's
# parts stashed in $1 (default /root/stash), check its hash, install the carried wheels and model
# packages beside the image's packages, then run scripts/gpu_check.py into $OUT (further arguments
# go to it). $OUT gets the results and the parts' logs alone (the device tool brings back at most 8
# files); what the parts write goes to $GPU_RUN_TMP/gpu_check_work. $GPU_RUN_TMP (default /tmp)
# holds the payload, the installed packages and that folder.
set -euo pipefail
stash=${1:-/root/stash}
shift || true
tmp=${GPU_RUN_TMP:-/tmp}
cat "$stash"/payload.tar.part* > "$tmp/payload.tar"
echo "$(cat "$stash/payload.sha256")  $tmp/payload.tar" | sha256sum -c --quiet \
    || { echo "error: the payload's parts do not add up (a call missing, or made on a machine since replaced);" \
              "the stash holds: $(ls "$stash" | tr '\n' ' ')"; exit 2; }
rm -rf "$tmp/payload" && tar -xf "$tmp/payload.tar" -C "$tmp" && rm "$tmp/payload.tar"
# Named site-packages: dill (through datasets) takes a module whose path lacks that name for the user's
# own code and pickles it by value, which fails for some compiled packages (pyarrow among them).
site=$tmp/site-packages
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$site" \
    "$tmp"/payload/wheels/*.whl
cp -r "$tmp/payload/site/." "$site/"
export PYTHONPATH="$site:$PWD" HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false PYTHONUNBUFFERED=1
export SCIFI_REFERENCE_DIR=$tmp/payload/data/corpus SCIFI_CACHE_DIR=$tmp/payload/cache
# What runs the check, for the record. A package that does not import here fails the parts that need
# it, each with its reason in the table; it must not stop the parts that do not (static and engines
# need neither trl nor datasets).
python3 -c "import sys, torch, transformers, trl, peft, datasets, accelerate as a
gpu = torch.cuda.get_device_name() if torch.cuda.is_available() else None
print('python', sys.version.split()[0], 'torch', torch.__version__, 'transformers', transformers.__version__,
      'trl', trl.__version__, 'peft', peft.__version__, 'datasets', datasets.__version__, 'accelerate', a.__version__,
      'gpu', gpu)" \
    || echo "warning: the versions above could not all be read (the error before this line); running the check anyway"
scifi=()
[ -f "$tmp/payload/data/scifi100.json" ] && scifi=(--scifi100 "$tmp/payload/data/scifi100.json")
# The call is stopped at its limit ($GPU_CALL_LIMIT, from calls.txt): what the set-up above took, and 40 s for the last
# part's kill and the writes, come off the check's budget (a --budget given below overrides).
budget=$(( ${GPU_CALL_LIMIT:-600} - 40 - SECONDS ))
echo "set-up took ${SECONDS} s; the check's budget: ${budget} s"
python3 scripts/gpu_check.py --out "${OUT:-runs/gpu_check}" --work "$tmp/gpu_check_work" --budget "$budget" \
    "${scifi[@]}" "$@"
