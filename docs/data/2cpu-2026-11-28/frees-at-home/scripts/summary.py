import json,glob,collections,sys
d=collections.defaultdict(dict)
for f in sorted(glob.glob('*-*-*.jsonl')):
    b,r,m=f[:-6].split('-')
    for l in open(f):
        x=json.loads(l)
        key=(x['op'],x['mode'],x['impl'],x.get('imap',''))
        d[(b,r)][key+(x['threads'],)]=x['value']
keys=sorted({k[:4] for v in d.values() for k in v})
print("two workers over one (median run of 3), per round: old | home")
for k in keys:
    row=[]
    for r in '123':
        cell=[]
        for b in ('old','home'):
            v=d[(b,r)]
            if k+(1,) in v and k+(2,) in v: cell.append(f"{v[k+(2,)]/v[k+(1,)]:.2f}")
            else: cell.append('-')
        row.append(' | '.join(cell))
    one=[]
    for r in '123':
        one.append(' | '.join(f"{d[(b,r)].get(k+(1,),0)/1e3:.0f}K" for b in ('old','home')))
    print(f"{k[0]:12s} {k[1]:9s} {k[2]:6s} x2/x1: {'   '.join(row)}   x1: {'   '.join(one)}")
