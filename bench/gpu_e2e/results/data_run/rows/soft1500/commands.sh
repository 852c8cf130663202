# row soft1500: mcprm at cb444a1f4a53b732dc364ce711e60bfc9bcd0fb3 (labels: 5ed3c3bf8e70e63af3e04cd464b094bd2d2b0ccc); inputs restored by
# 'bash bench/gpu_e2e/data_run.sh setup' from bench/gpu_e2e/results/data_run (W=/tmp/dr)
mcprm train /tmp/dr/c_def --version 1 --output /tmp/dr/prm_soft1500 --base-model /tmp/qwen --no-progress --overwrite --targets soft --label-rule soft 
# the inputs: PB-MATH's dev part (the file of .xfer/data_run), and the held-out solutions of the chunks
(cd SNAPSHOT && python3 -c import\ sys\;\ sys.path.insert\(0\,\ \'bench\'\)\;\ from\ pathlib\ import\ Path\;\ import\ bench_human_labels\ as\ h\;\ print\(h.write_part\(h.read_set\(\'/tmp/dr/pb.jsonl.gz\'\)\,\ \'dev\'\,\ Path\(\'/tmp/dr/pb/dev\'\)\,\ None\)\))
python3 bench/gpu_e2e/data_run.py input /tmp/dr heldout /tmp/dr/in/heldout8.jsonl
mcprm score /tmp/dr/prm_soft1500 --input /tmp/dr/pb/dev/input.jsonl --output /tmp/dr/sc_pb_soft1500 --batch-size 64 --device cuda --overwrite --max-length 4096 
mcprm eval /tmp/dr/sc_pb_soft1500 --reference /tmp/dr/pb/dev/reference.jsonl --json 
python3 /work/main/bench/gpu_e2e/prm_metrics.py /tmp/dr/sc_pb_soft1500 /tmp/dr/pb/dev/reference.jsonl --dump /tmp/dr/rows/soft1500/scores_pb.jsonl.gz 
mcprm score /tmp/dr/prm_soft1500 --input /tmp/dr/in/heldout8.jsonl --output /tmp/dr/sc_bo_soft1500 --batch-size 128 --device cuda --overwrite --max-length 4096 
mcprm bestofn /tmp/dr/sc_bo_soft1500 --choose-on 0.3 --json 
python3 /work/main/bench/gpu_e2e/prm_metrics.py /tmp/dr/sc_bo_soft1500 --dump /tmp/dr/rows/soft1500/scores_bo.jsonl.gz 
