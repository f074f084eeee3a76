"""Replays every 2-vCPU evidence file under docs/data (this directory's own aside) with
keep 0 and 0.35 and counts the rows other than legacy page_fault3 threads that move by
more than a point or cross the +-15 % bound. From the repository root, after
cargo build --release -p vmbench: python3 docs/data/2cpu-2026-11-28/keep/scripts/other-rows.py"""
import json,subprocess,sys,tempfile,os,glob
files=sorted(glob.glob('docs/data/2cpu-2026-11-2*/**/evidence*.jsonl.gz',recursive=True))
files=[f for f in files if '/keep/' not in f]
cross=[];moved=0;total=0
for f in files:
    res={}
    for k in ('0','0.35'):
        subprocess.run(['python3','docs/data/2cpu-2026-11-28/keep/scripts/with-keep.py',k,f,'/tmp/x.jsonl.gz'],check=True)
        with tempfile.TemporaryDirectory() as out:
            r=subprocess.run(['./target/release/vmbench','project','--validate','--replay','/tmp/x.jsonl.gz','--json','--out',out],capture_output=True,text=True)
        res[k]={(x['workload'],x['config'],x['cpus']):x['error'] for x in map(json.loads,[l for l in r.stdout.splitlines() if l.startswith('{')])}
    for key,e0 in res['0'].items():
        e1=res['0.35'].get(key)
        if e1 is None: continue
        if key[0]=='page_fault3' and key[1]=='legacy threads': continue
        total+=1
        if abs(e1-e0)>0.01: moved+=1
        if (abs(e0)<=0.15)!=(abs(e1)<=0.15): cross.append((f,key,round(e0*100,1),round(e1*100,1)))
print(len(files),'files; rows other than legacy page_fault3 threads:',total,'; moved by more than 1 point:',moved)
for c in cross: print('crossed:',c)
