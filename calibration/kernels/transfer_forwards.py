#!/usr/bin/env python3
"""The H100 -> H200 transfer error on whole forwards (docs/COST-MODEL.md, "H100 <-> H200 transfer error").

Composes with `--cost-model measured` (the GPU's own kernel table when it has one, as the H200 now does; else the
nearest table by efficiency transfer) the whole forwards the project timed on an H200 under CUDA graphs
(calibration/profiles/h200/logs/run13_bf16_paired_sweep.log: Llama-3.1-8B and Qwen3-8B, prefill 512-32k, decode
batch 1-256), kernel terms only (no sampling, all-reduce or host work, as the timed forwards have none), and prints
the error per point and per kind.
Run from the repository root after building: python3 calibration/kernels/transfer_forwards.py [GPU] [SERVESIM]
"""
import json
import re
import subprocess
import sys

log='calibration/profiles/h200/logs/run13_bf16_paired_sweep.log'
model=None;rows=[]
for l in open(log):
    m=re.match(r'servesim-calibrate: (\S+) on NVIDIA H200',l)
    if m: model=m.group(1)
    m=re.search(r'forward_(prefill_T(\d+)|decode_B(\d+)_C(\d+))\s+measured\s+([\d.]+) ms',l)
    if m:
        if m.group(2): spec=f"prefill={m.group(2)}"; kind='prefill'
        else: spec=f"decode={m.group(3)}x{int(m.group(4))-1}"; kind='decode'
        rows.append((model,kind,spec,float(m.group(5))))
gpu = sys.argv[1] if len(sys.argv) > 1 else 'H200'
exe = sys.argv[2] if len(sys.argv) > 2 else './build-dev/tools/servesim'
errs={'prefill':[],'decode':[]}
for model,kind,spec,ms in rows:
    j=json.loads(subprocess.check_output([exe,'inspect','--model',model,'--gpu',gpu,'--cost-model','measured','--step-costs',spec,'--format','json']))
    comp=sum(t['ms'] for t in j['terms'] if t['term'] not in ('sampling','comm','overhead','host (not hidden)'))
    e=100*(comp-ms)/ms; errs[kind].append(e)
    print(f"{model:14} {spec:18} measured {ms:9.3f} composed {comp:9.3f} {e:+6.1f}%")
for k,v in errs.items():
    print(k, len(v), 'mean|err| %.1f%%'%(sum(map(abs,v))/len(v)), 'mean %.1f%%'%(sum(v)/len(v)), 'max %.1f%%'%max(map(abs,v)))
