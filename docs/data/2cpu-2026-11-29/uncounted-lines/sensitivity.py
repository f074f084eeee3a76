#!/usr/bin/env python3
"""Replays validation evidence with K more lines in each mmap_lock write
section of maple malloc1 threads interleaved (turn-taking) operations,
all written and all reached through a pointer, and prints that row's
error and predicted/measured mmap_lock contention (%) for each K.
Usage, from the repository root: B=target/release/vmbench python3
docs/data/2cpu-2026-11-29/uncounted-lines/sensitivity.py 0,10,20,40 EVIDENCE..."""
import json, gzip, sys, subprocess, tempfile, os
B=os.environ.get('B', 'target/release/vmbench')
EVS=sys.argv[2:]
Ks=[int(k) for k in sys.argv[1].split(',')]
def patch(p,K,where):
    il=p.get(where) if where else p
    if not il: return
    mm=[i for i,l in enumerate(p['locks']) if l['class']=='mmap_lock'][0]
    for op in il['ops']:
        held=False; last=None
        for j,s in enumerate(op):
            if s['step']=='acquire' and s['lock']==mm and s['write']: held=True; last=None
            elif s['step']=='lines' and s['lock']==mm and held: last=j
            elif s['step']=='release' and s['lock']==mm and held:
                if last is None: op.insert(j,{'step':'lines','lock':mm,'read':0,'written':0,'chain':0}); last=j
                op[last]['written']+=K; op[last]['chain']=op[last].get('chain',0)+K
                held=False
def run(ev,K):
    with tempfile.TemporaryDirectory() as d:
        out=os.path.join(d,'ev.jsonl.gz')
        with gzip.open(ev,'rt') as f, gzip.open(out,'wt') as g:
            for l in f:
                o=json.loads(l); p=o['profile']
                if p['mode']=='threads' and p['workload']=='malloc1' and p['index']=='maple':
                    patch(p,K,'interleaved')
                g.write(json.dumps(o)+'\n')
        r=subprocess.run([B,'project','--validate','--replay',out,'--json','--out',d+'/o'],capture_output=True,text=True)
    rows=[json.loads(l) for l in r.stdout.splitlines() if l.startswith('{')]
    return [x for x in rows if x['workload']=='malloc1' and x['config']=='maple threads']
for ev in EVS:
    res=[]
    for K in Ks:
        x=run(ev,K)
        if not x: res.append('-'); continue
        x=x[0]; c={cc['class']:cc for cc in x.get('contended',[])}
        res.append(f"K={K}: {x['error']*100:+.0f}% (mmap_lock {c.get('mmap_lock',{}).get('predicted',0)*100:.0f}/{c.get('mmap_lock',{}).get('measured',0)*100:.0f})")
    print(ev.split('data/')[-1][:45].ljust(45),' | '.join(res),flush=True)
