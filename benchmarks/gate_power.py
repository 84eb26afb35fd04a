#!/usr/bin/env python3
# The power of compare's gate per line (issue 45), from the variance the runs of
# `benchmarks/gate.sh collect DIR` show: per runtime, the standard deviation of the log of an
# invocation's value, the change --timer-slack 1 and --busy 1300 made, and by simulation the share
# of comparisons of k invocations a side (Student's t, Holm's first threshold 0.05 / 15, the 5 %
# threshold) that find it. Usage: benchmarks/gate_power.py DIR
import json, glob, math, random, statistics as st, collections, sys
root = sys.argv[1]
def load(kind, metric='lateness'):
    out = collections.defaultdict(list)  # runtime -> [log invocation mean]
    for f in sorted(glob.glob(f'{root}/{kind}/*/run.json')):
        r = json.load(open(f))
        if not r.get('complete'): continue
        by = collections.defaultdict(list)
        for row in r['rows']:
            s = row.get('statistics')
            if s and row['status'] == 'ok':
                v = s[metric]['p50']
                if v and v > 0: by[row['runtime']].append(v)
        for k, v in by.items(): out[k].append(math.log(st.mean(v)))
    return out
a, slack = load('a'), load('slack')
busy_a, busy = load('a', 'busy'), load('busy', 'busy')
def tcrit(df, alpha):
    # two-sided critical t by bisection on a simulated-free normal approx? use scipy-free series: numeric integration
    def tpdf(x): return math.gamma((df+1)/2)/(math.sqrt(df*math.pi)*math.gamma(df/2))*(1+x*x/df)**(-(df+1)/2)
    def sf(t):
        N=4000; b=t+200; h=(b-t)/N
        return sum(tpdf(t+(i+0.5)*h) for i in range(N))*h
    lo, hi = 0.0, 200.0
    for _ in range(60):
        mid=(lo+hi)/2
        if 2*sf(mid) > alpha: lo=mid
        else: hi=mid
    return hi
m, alpha = 15, 0.05
print(f"{len(next(iter(a.values())))} A invocations; per runtime: sd of log invocation means (≈ CV), effect of --timer-slack 1, --busy 1300")
rows=[]
for rt in sorted(a):
    sd = st.stdev(a[rt]); eff = st.mean(slack[rt]) - st.mean(a[rt]) if len(slack[rt]) else float('nan')
    effb = st.mean(busy[rt]) - st.mean(busy_a[rt]) if len(busy[rt]) else float('nan')
    sdb = st.stdev(busy_a[rt])
    rows.append((rt, sd, eff, sdb, effb))
crit = {k: tcrit(2*k-2, alpha/m) for k in (2,3,4,5,6,8,10)}
random.seed(45)
def power(sd, eff, k, n=4000):
    if not (sd > 0) or math.isnan(eff): return float('nan')
    hits=0; c=crit[k]
    for _ in range(n):
        x=[random.gauss(0, sd) for _ in range(k)]; y=[random.gauss(eff, sd) for _ in range(k)]
        sp=(st.variance(x)+st.variance(y))/2
        t=(st.mean(y)-st.mean(x))/math.sqrt(sp*2/k)
        hits += abs(t) > c and abs(math.exp(st.mean(y)-st.mean(x))-1) > 0.05
    return hits/n
print(f"{'runtime':15s} {'sd':>6s} {'slack':>7s} " + " ".join(f"k={k:<3d}" for k in crit) + f" | {'sd busy':>7s} {'busy':>6s} " + " ".join(f"k={k:<3d}" for k in crit))
for rt, sd, eff, sdb, effb in rows:
    print(f"{rt:15s} {100*sd:5.1f}% {100*(math.exp(eff)-1):+6.0f}% " + " ".join(f"{power(sd, eff, k, 1000):5.2f}" for k in crit)
          + f" | {100*sdb:6.1f}% {100*(math.exp(effb)-1):+5.0f}% " + " ".join(f"{power(sdb, effb, k, 1000):5.2f}" for k in crit))
