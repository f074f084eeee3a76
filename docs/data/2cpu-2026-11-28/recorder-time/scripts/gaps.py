import gzip, json, sys, statistics as st
# Per profile: Run time between a release of mmap_lock and the next acquire
# of it (gaps), and mmap_lock hold lengths, plain and interleaved.
for line in gzip.open(sys.argv[1],'rt'):
    o=json.loads(line); p=o['profile']
    if p['workload'] not in sys.argv[2].split(',') or p['imap']!='single': continue
    for name,q in (('plain',p),('turns',p.get('interleaved'))):
        if not q: continue
        locks=q['locks']; gaps=[]; holds=[]
        for op in q['ops']:
            t=None; h=None
            for s in op:
                if s['step']=='run':
                    if t is not None: t+=s['ns']
                    if h is not None: h+=s['ns']
                elif s['step']=='release' and locks[s['lock']]['class']=='mmap_lock':
                    t=0.0
                    if h is not None: holds.append(h); h=None
                elif s['step']=='acquire' and locks[s['lock']]['class']=='mmap_lock':
                    if t is not None: gaps.append(t)
                    t=None; h=0.0
        if len(gaps)>3:
            g=st.quantiles(gaps,n=4); hh=st.quantiles(holds,n=4)
            print('%-12s %-6s %-9s %-5s gaps %4d p25/50/75 %5.0f %5.0f %5.0f  holds p25/50/75 %5.0f %5.0f %5.0f  op %5.0f'%(p['workload'],p['index'],p['mode'],name,len(gaps),*g,*hh,1e9/q['ops_per_sec']))
