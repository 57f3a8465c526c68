#!/bin/bash
# usage: ab40.sh OLD_BIN NEW_BIN [ROUNDS]: alternated rounds, medians (req/s or MB/s per row)
OLD=$1; NEW=$2; R=${3:-3}
FIX=/work/main/loadtest/fixtures
out=/tmp/r/ab40.txt; : > $out
for r in $(seq 1 $R); do
 for tag in old new; do
  B=$OLD; [ $tag = new ] && B=$NEW
  for row in "1k c10:/1k.bin:10" "96k c10:/96k.bin:10" "16m c10:/16m.bin:10" "1k c100:/1k.bin:100"; do
   name=${row%%:*}; rest=${row#*:}; path=${rest%%:*}; c=${rest##*:}
   taskset -c 0 $B --listen 127.0.0.1:18210 --admin-listen off --access-log off $FIX > /tmp/r/ab40-srv.log 2>&1 &
   S=$!; sleep 0.4
   taskset -c 1 wrk -t1 -c$c -d1s http://127.0.0.1:18210$path > /dev/null 2>&1
   res=$(taskset -c 1 wrk -t1 -c$c -d4s http://127.0.0.1:18210$path 2>&1)
   rps=$(echo "$res" | awk '/Requests\/sec/ {print $2}')
   tps=$(echo "$res" | awk '/Transfer\/sec/ {print $2}')
   kill $S; wait $S 2>/dev/null
   echo "$r $tag $name $rps $tps" | tee -a $out
  done
 done
done
python3 - <<'PY'
import statistics, collections
d=collections.defaultdict(list)
for l in open('/tmp/r/ab40.txt'):
    r,tag,a,b,rps,tps=l.split()
    d[(a+' '+b,tag)].append(float(rps))
rows=sorted({k[0] for k in d})
for row in rows:
    o=statistics.median(d[(row,'old')]); n=statistics.median(d[(row,'new')])
    print(f"{row:10s} old {o:10.0f} req/s  new {n:10.0f} req/s  new/old {n/o:.3f}")
PY
