import json,sys,statistics as st
def summ(path):
    rows=json.load(open(path))
    out={}
    for r in rows:
        if r.get('exact') or r.get('approximate') or r.get('relative_error') is None: continue
        p=r['paper']; out.setdefault(p,[]).append(r)
    res={}
    allc=[];alls=[]
    for p,rs in sorted(out.items()):
        c=[abs(r['relative_error']) for r in rs if r.get('comparable')]
        tt=[r for r in rs if r['metric'] in ('tpot','ttft','throughput','latency','time') or r.get('unit') in ('ms','s','tok/s','us')]
        fast=0;slow=0
        for r in tt:
            e=r['relative_error']
            thr = 'tok' in (r.get('unit') or '') or 'throughput' in r['metric']
            faster = (e>0) if thr else (e<0)
            if e==0: continue
            fast+=faster; slow+= not faster
        res[p]=(len(rs),len(c),st.median(c) if c else None,fast,slow)
        allc+=c; alls.append((fast,slow))
    F=sum(a for a,b in alls); S=sum(b for a,b in alls)
    return res, st.median(allc), F, S
for path in sys.argv[1:]:
    res,m,F,S=summ(path)
    print(path, 'comparable median %.1f%%'%(100*m), 'time/throughput faster than published: %d of %d (%.0f%%)'%(F,F+S,100*F/(F+S)))
    for p,(n,nc,med,f,s) in res.items(): print('  %-12s figures %3d comparable %3d median %s  faster %d / slower %d'%(p,n,nc,'%.1f%%'%(100*med) if med is not None else '-',f,s))
