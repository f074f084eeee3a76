import json, sys, statistics as st
# Per validation directory: rows within ±15 % (all, threads), median |error|,
# malloc1 maple threads' error, and the calibration's scale factors by index.
for d in sys.argv[1:]:
    rows=[json.loads(l) for l in open(d+'/validation.jsonl')]
    e=[r['error'] for r in rows]; t=[r['error'] for r in rows if r['mode']=='threads']
    m=[r['error'] for r in rows if r['workload']=='malloc1' and r['index']=='maple' and r['mode']=='threads']
    sc={}
    for r in rows:
        for x in r.get('scaled',[]): sc.setdefault(r['index'],[]).append(x)
    scs='  '.join('%s scaled %.2f–%.2f (median %.2f)'%(k,min(v),max(v),st.median(v)) for k,v in sorted(sc.items()))
    print('%-10s %2d/%d within (threads %d/%d), median |err| %4.1f %%, malloc1 maple threads %+6.1f %%  %s'%(d.split('/')[-1],sum(abs(x)<=0.15 for x in e),len(e),sum(abs(x)<=0.15 for x in t),len(t),100*st.median(map(abs,e)),100*m[0] if m else float('nan'),scs))
