import json, sys, glob, statistics as st
# Per validation directory: rows within the bound, median |error|, and the malloc1 maple threads error.
for d in sys.argv[1:]:
    rows=[json.loads(l) for l in open(d+'/validation.jsonl')]
    errs=[r['error'] for r in rows]
    within=sum(abs(e)<=0.15 for e in errs)
    m=[r for r in rows if r['workload']=='malloc1' and r['index']=='maple' and r.get('mode','')=='threads']
    print('%-14s %2d/%2d within, median |err| %5.1f %%, malloc1 maple threads %s'%(d.split('/')[-1],within,len(rows),100*st.median(abs(e) for e in errs),' '.join('%+.1f %%'%(100*r['error']) for r in m)))
