import json,subprocess,sys,re,collections
W,I=sys.argv[1],sys.argv[2]
res={}
for t in (1,2):
    run=[json.loads(l) for l in open(f'/tmp/run-{W}-{I}-{t}.json')][0]
    ops=run['ops']; cpu=run['cpu']['on_cpu_ns']
    out=subprocess.run(['perf','report','-i',f'/tmp/perf-{W}-{I}-{t}.data','--no-children','--sort','symbol','--stdio','-g','none','--percent-limit','0.2'],capture_output=True,text=True).stdout
    d={}
    for line in out.splitlines():
        m=re.match(r'\s+([\d.]+)%\s+\[[.k]\]\s+(.*)',line)
        if m: d[m.group(2).strip()[:90]]=float(m.group(1))/100*cpu/ops
    res[t]=d
keys=sorted(set(res[1])|set(res[2]),key=lambda k:-(res[2].get(k,0)-res[1].get(k,0)))
print(f"{'ns/op 1t':>9} {'2t':>8} {'diff':>8}  symbol")
for k in keys[:35]:
    a,b=res[1].get(k,0),res[2].get(k,0)
    print(f"{a:9.1f} {b:8.1f} {b-a:8.1f}  {k}")
print("total", sum(res[1].values()), sum(res[2].values()))
