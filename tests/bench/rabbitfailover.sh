#!/bin/sh
# RabbitMQ failover time on the three-node cluster of rabbitmq3.sh: kills the
# leader of quorum queue "fo" (declare it first through the management API)
# and polls another node until it lists a new leader. Restart the killed
# node with rabbitstart.sh N.
# kill -9 the leader of queue fo, measure until another node lists a new leader
leader=$(curl -s -u guest:guest http://127.0.0.1:15682/api/queues/%2F/fo | python3 -c 'import json,sys; print(json.load(sys.stdin)["leader"])')
n=${leader#r}; n=${n%@localhost}
other=$(( n % 3 + 1 ))
pid=$(for p in $(pgrep beam.smp); do if tr '\0' ' ' < /proc/$p/cmdline | grep -q "r$n@localhost"; then echo $p; fi; done | head -1)
[ -z "$pid" ] && pid=$(for p in $(pgrep beam.smp); do if tr '\0' '\n' < /proc/$p/environ 2>/dev/null | grep -q "RABBITMQ_NODENAME=r$n@"; then echo $p; fi; done | head -1)
echo "leader $leader pid $pid asking r$other"
start=$(date +%s.%N)
kill -9 $pid
while :; do
  l=$(curl -s -m 1 -u guest:guest http://127.0.0.1:1568$other/api/queues/%2F/fo | python3 -c 'import json,sys
try: print(json.load(sys.stdin).get("leader",""))
except Exception: print("")')
  if [ -n "$l" ] && [ "$l" != "None" ] && [ "$l" != "$leader" ]; then break; fi
  sleep 0.05
done
end=$(date +%s.%N)
echo "new leader $l after $(echo "$end - $start" | bc) s"
